import { describe, expect, it } from '@jest/globals';
import type { InferOpcode, InvokeRequestBody, Opcode, ScoreOpcode } from '@dws/protocol';
import { executePass } from './execution.js';
import { createRunner } from './runner.js';
import { testWorkflow } from './testing.js';
import type { WorkflowHandler } from './types.js';

const newRunner = () => createRunner({ apiKey: 'k', env: {} });
const input = (): InvokeRequestBody => ({
  event: { name: 'e', data: {} },
  steps: {},
  ctx: { runId: 'r', workflow: 'w', attempt: 0, app: 'default', runner: '' },
});
const scoresOf = (ops: Opcode[]) => ops.filter((o): o is ScoreOpcode => o.op === 'Score');
const numbers = (n: number) => Array.from({ length: n }, (_, i) => ({ q: i, expected: i * 2 }));

describe('step.ai.eval', () => {
  it('runs the first 200 items of a larger dataset, writes one score each, and says it truncated', async () => {
    const ran: number[] = [];
    const wf = newRunner().workflow('eval', ({ step }) =>
      step.ai.eval('doubling', {
        name: 'exact',
        dataset: numbers(250),
        task: (item) => {
          ran.push(item.q);
          // Wrong on every 4th item.
          return item.q % 4 === 0 ? -1 : item.q * 2;
        },
        score: (item, output) => (output === item.expected ? 1 : { value: 0, note: `got ${output}` }),
      }),
    );
    const out = await testWorkflow(wf);
    expect(out.result).toEqual({
      name: 'exact',
      count: 200,
      total: 250,
      truncated: true,
      mean: 0.75,
      scores: numbers(200).map((x) => (x.q % 4 === 0 ? 0 : 1)),
    });
    expect([...ran].sort((a, b) => a - b)).toEqual(numbers(200).map((x) => x.q));
    // One task step and one Score per item, each under its own id; nothing for items 200..249.
    expect(out.stepsRun).toHaveLength(200);
    expect(out.stepsRun).not.toContain('doubling:task-200');
    const scores = scoresOf(out.opcodes);
    expect(scores).toHaveLength(200);
    expect(scores.find((s) => s.name === 'doubling:score-4')?.data).toEqual({
      note: 'got -1',
      name: 'exact',
      value: 0,
      eval: 'doubling',
      index: 4,
    });
    expect(scores.find((s) => s.name === 'doubling:score-5')?.data).toEqual({ name: 'exact', value: 1, eval: 'doubling', index: 5 });
    // Parallel: a pass of task steps, a pass of scores, the return.
    expect(out.passes).toBe(3);
  });

  it('reports every item of a pass at once: 200 task steps in the first 206', async () => {
    const handler: WorkflowHandler = ({ step }) =>
      step.ai.eval('e', { name: 'n', dataset: numbers(201), task: (x) => x.q, score: () => 1 });
    const r = await executePass(handler, input());
    expect(r.status).toBe(206);
    const ops = (r.body as { opcodes: Opcode[] }).opcodes;
    expect(ops).toHaveLength(200);
    expect(ops.every((o) => o.op === 'StepRun')).toBe(true);
    expect(ops.map((o) => o.name)).toEqual(numbers(200).map((x) => `e:task-${x.q}`));
  });

  it('does not truncate 200 items or fewer, and has no mean for none', async () => {
    const wf = newRunner().workflow('eval', async ({ step }) => ({
      full: await step.ai.eval('full', { name: 'n', dataset: numbers(200), task: (x) => x.q, score: (_x, _o, i) => i % 2 }),
      empty: await step.ai.eval('empty', { name: 'n', dataset: [], task: () => 1, score: () => 1 }),
    }));
    const out = await testWorkflow(wf);
    expect(out.result).toMatchObject({
      full: { count: 200, total: 200, truncated: false, mean: 0.5 },
      empty: { count: 0, total: 0, truncated: false, mean: null, scores: [] },
    });
  });

  it('shares the 200 items among the evals of one run, in call order, the same on every pass', async () => {
    const wf = newRunner().workflow('eval', async ({ step }) => {
      const first = await step.ai.eval('a', { name: 'n', dataset: numbers(150), task: (x) => x.q, score: () => 1 });
      const second = await step.ai.eval('b', { name: 'n', dataset: numbers(100), task: (x) => x.q, score: () => 0 });
      const third = await step.ai.eval('c', { name: 'n', dataset: numbers(1), task: (x) => x.q, score: () => 0 });
      return [first, second, third].map(({ count, total, truncated }) => ({ count, total, truncated }));
    });
    const out = await testWorkflow(wf);
    expect(out.result).toEqual([
      { count: 150, total: 150, truncated: false },
      { count: 50, total: 100, truncated: true },
      { count: 0, total: 1, truncated: true },
    ]);
    expect(scoresOf(out.opcodes)).toHaveLength(200);
    expect(out.stepsRun.filter((n) => n.startsWith('b:'))).toHaveLength(50);
  });

  it('can make each task a model call the service makes (step.ai.generate per item, output schema included)', async () => {
    const wf = newRunner().workflow('eval', ({ step }) =>
      step.ai.eval('qa', {
        name: 'correct',
        dataset: [
          { q: '1+1', a: 2 },
          { q: '2+2', a: 4 },
        ],
        generate: (item) => ({
          model: 'm',
          prompt: item.q,
          temperature: 0,
          output: { type: 'object', properties: { answer: { type: 'number' } }, required: ['answer'] },
        }),
        score: (item, result) => ((result.output as { answer: number }).answer === item.a ? 1 : 0),
      }),
    );
    const out = await testWorkflow(wf, {
      ai: (req) => ({ text: (req as { prompt: string }).prompt === '1+1' ? '{"answer":2}' : '{"answer":5}' }),
    });
    expect(out.result).toMatchObject({ count: 2, mean: 0.5, scores: [1, 0] });
    const calls = out.opcodes.filter((o): o is InferOpcode => o.op === 'Infer');
    expect(calls.map((c) => c.name)).toEqual(['qa:generate-0', 'qa:generate-1']);
    expect(calls[0]?.data).not.toHaveProperty('output');
  });

  it.each<[string, Record<string, unknown>, RegExp]>([
    [
      'a score that is not a number',
      { name: 'n', dataset: [1], task: () => 1, score: () => 'good' },
      /score of item 0 must return a finite number or \{ value: number, \.\.\. \}, not "good"/,
    ],
    ['a NaN score', { name: 'n', dataset: [1], task: () => 1, score: () => ({ value: Number.NaN }) }, /must return a finite number/],
    [
      'both task and generate',
      { name: 'n', dataset: [1], task: () => 1, generate: () => ({}), score: () => 1 },
      /needs exactly one of task .* or generate/,
    ],
    ['neither task nor generate', { name: 'n', dataset: [1], score: () => 1 }, /needs exactly one of task/],
    ['no name', { dataset: [1], task: () => 1, score: () => 1 }, /\.name must be a non-empty string/],
    ['a dataset that is no array', { name: 'n', dataset: 'abc', task: () => 1, score: () => 1 }, /\.dataset must be an array/],
  ])('fails the run (400) on %s', async (_what, options, message) => {
    const wf = newRunner().workflow('eval', ({ step }) => step.ai.eval('e', options as never));
    await expect(testWorkflow(wf)).rejects.toMatchObject({ name: 'NonRetriableError', message: expect.stringMatching(message) });
  });
});
