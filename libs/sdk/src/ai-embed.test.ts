import { describe, expect, it } from '@jest/globals';
import { hashStepId, type InferOpcode, type InvokeRequestBody } from '@dws/protocol';
import { executePass } from './execution.js';
import { createRunner } from './runner.js';
import { testWorkflow } from './testing.js';
import type { WorkflowHandler } from './types.js';

const input = (): InvokeRequestBody => ({
  event: { name: 'e', data: {} },
  steps: {},
  ctx: { runId: 'r', workflow: 'w', attempt: 0, app: 'default', runner: '' },
});
const texts = (n: number) => Array.from({ length: n }, (_, i) => `text ${i}`);
/** A fake embedding per input: [its number, its length], so order is checkable. */
const vector = (s: string) => [Number(s.split(' ')[1]), s.length];
/** The service's answer to one batch (invoker: `{ embeddings, response }`). */
const answer = (req: unknown) => {
  const inputs = (req as { inputs: string[] }).inputs;
  return {
    embeddings: inputs.map(vector),
    response: { object: 'list', model: 'emb-1', usage: { prompt_tokens: inputs.length, total_tokens: inputs.length } },
  };
};

describe('step.ai.embed', () => {
  it('cuts 250 inputs into three durable batches of 100, 100 and 50, reported together, without batchSize on the wire', async () => {
    const handler: WorkflowHandler = ({ step }) => step.ai.embed('vec', { provider: 'openai', model: 'emb', inputs: texts(250) });
    const r = await executePass(handler, input());
    expect(r.status).toBe(206);
    const ops = (r.body as { opcodes: InferOpcode[] }).opcodes;
    expect(ops.map((o) => [o.op, o.name, o.id, (o.data as { inputs: string[] }).inputs.length])).toEqual([
      ['Infer', 'vec:batch-0', hashStepId('vec:batch-0'), 100],
      ['Infer', 'vec:batch-1', hashStepId('vec:batch-1'), 100],
      ['Infer', 'vec:batch-2', hashStepId('vec:batch-2'), 50],
    ]);
    expect(ops[2]?.data).toEqual({ kind: 'embed', provider: 'openai', model: 'emb', inputs: texts(250).slice(200) });
  });

  it('hands back one vector per input, in input order, across batches', async () => {
    const wf = createRunner({ apiKey: 'k', env: {} }).workflow('embed', ({ step }) =>
      step.ai.embed('vec', { provider: 'openai', model: 'emb', inputs: texts(250) }),
    );
    // Answered in reverse batch order: the result still follows the inputs.
    const out = await testWorkflow(wf, { ai: (req) => answer(req) });
    expect(out.passes).toBe(2);
    expect(out.result).toEqual({ embeddings: texts(250).map(vector), model: 'emb-1', batches: 3 });
  });

  it('takes batchSize, and makes no step for no inputs', async () => {
    const wf = createRunner({ apiKey: 'k', env: {} }).workflow('embed', async ({ step }) => ({
      small: await step.ai.embed('small', { model: 'emb', inputs: texts(5), batchSize: 2 }),
      none: await step.ai.embed('none', { model: 'emb', inputs: [] }),
    }));
    const out = await testWorkflow(wf, { ai: (req) => answer(req) });
    expect(out.opcodes.map((o) => [o.name, (o as InferOpcode).data])).toEqual([
      ['small:batch-0', { kind: 'embed', model: 'emb', inputs: ['text 0', 'text 1'] }],
      ['small:batch-1', { kind: 'embed', model: 'emb', inputs: ['text 2', 'text 3'] }],
      ['small:batch-2', { kind: 'embed', model: 'emb', inputs: ['text 4'] }],
    ]);
    expect(out.result).toEqual({
      small: { embeddings: texts(5).map(vector), model: 'emb-1', batches: 3 },
      none: { embeddings: [], batches: 0 },
    });
  });

  it('fails the run on a batch that answers the wrong number of vectors', async () => {
    const wf = createRunner({ apiKey: 'k', env: {} }).workflow('embed', ({ step }) =>
      step.ai.embed('vec', { model: 'emb', inputs: texts(3) }),
    );
    await expect(testWorkflow(wf, { ai: () => ({ embeddings: [[1]] }) })).rejects.toThrow(
      'step.ai.embed("vec"): batch 0 answered 1 embeddings for 3 inputs',
    );
  });

  it.each<[string, unknown, RegExp]>([
    ['inputs that are not strings', { model: 'e', inputs: ['a', 1] }, /\.inputs must be an array of strings/],
    ['no inputs', { model: 'e' }, /\.inputs must be an array of strings/],
    ['batchSize 0', { model: 'e', inputs: ['a'], batchSize: 0 }, /\.batchSize must be a positive integer/],
    ['a fractional batchSize', { model: 'e', inputs: ['a'], batchSize: 1.5 }, /\.batchSize must be a positive integer/],
  ])('fails the run (400) on %s', async (_what, request, message) => {
    const r = await executePass(({ step }) => step.ai.embed('vec', request as never), input());
    expect(r.status).toBe(400);
    expect((r.body as { error: { message: string } }).error.message).toMatch(message);
  });
});
