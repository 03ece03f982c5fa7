import { describe, expect, it } from '@jest/globals';
import { hashStepId, type InferOpcode, type InvokeRequestBody, type Memo } from '@dws/protocol';
import { AiOutputError, compileJsonSchema, formatAjvErrors, isAiOutputError, parseAnswer } from './ai-output.js';
import { isNonRetriableError } from './errors.js';
import { executePass } from './execution.js';
import { createRunner } from './runner.js';
import type { StandardSchemaV1 } from './standard-schema.js';
import { testWorkflow } from './testing.js';
import type { JsonSchema } from './types.js';

const PERSON: JsonSchema = {
  type: 'object',
  properties: { name: { type: 'string' }, age: { type: 'integer', minimum: 0 } },
  required: ['name', 'age'],
  additionalProperties: false,
};

const newRunner = () => createRunner({ apiKey: 'k', env: {} });
/** The model requests a run made, in order. */
const infers = (ops: { op: string }[]) => ops.filter((o): o is InferOpcode => o.op === 'Infer');

/** A workflow asking for a person with `output`, returning what generate resolved with. */
function personWorkflow(extra: Record<string, unknown> = {}) {
  return newRunner().workflow('extract', async ({ step }) =>
    step.ai.generate<{ name: string; age: number }>('person', { model: 'm', prompt: 'Ada, 36', output: PERSON, ...extra }),
  );
}

describe('step.ai.generate with an output schema', () => {
  it('parses and validates a good first answer: one call, output parsed, the schema in the system prompt and not in the request', async () => {
    const out = await testWorkflow(personWorkflow({ system: 'You extract people.' }), {
      ai: { person: { text: '{"name":"Ada","age":36}', response: { id: 'r1' } } },
    });
    expect(out.result).toEqual({ text: '{"name":"Ada","age":36}', response: { id: 'r1' }, output: { name: 'Ada', age: 36 }, reasks: 0 });
    const [call, ...more] = infers(out.opcodes);
    expect(more).toEqual([]);
    expect(call?.name).toBe('person');
    const data = call?.data as Record<string, unknown>;
    expect(data).not.toHaveProperty('output');
    expect(data).not.toHaveProperty('reasks');
    expect(data).toMatchObject({ kind: 'generate', model: 'm', prompt: 'Ada, 36' });
    expect(data.system).toBe(
      `You extract people.\n\nAnswer with JSON only: one JSON value, no prose before or after it, no code fences. It must match this JSON Schema:\n${JSON.stringify(PERSON)}`,
    );
  });

  it('re-asks once on an invalid answer, with the bad answer and the validation error, then takes the valid one', async () => {
    const answers: Record<string, unknown> = {
      person: { text: '{"name":"Ada","age":"thirty-six"}', response: { id: 'r1' } },
      'person:reask-1': { text: '{"name":"Ada","age":36}', response: { id: 'r2' } },
    };
    const out = await testWorkflow(personWorkflow(), { ai: answers });
    expect(out.result).toEqual({ text: '{"name":"Ada","age":36}', response: { id: 'r2' }, output: { name: 'Ada', age: 36 }, reasks: 1 });
    const calls = infers(out.opcodes);
    expect(calls.map((c) => c.name)).toEqual(['person', 'person:reask-1']);
    const reask = calls[1]?.data as Record<string, unknown>;
    // The conversation goes on from the prompt: the refused answer, then what was wrong with it.
    expect(reask).not.toHaveProperty('prompt');
    expect(reask.messages).toEqual([
      { role: 'user', content: 'Ada, 36' },
      { role: 'assistant', content: '{"name":"Ada","age":"thirty-six"}' },
      {
        role: 'user',
        content:
          'Your previous answer was refused: /age must be integer. Answer again with JSON only, matching the schema given in the instructions.',
      },
    ]);
    expect(reask.system).toBe((calls[0]?.data as Record<string, unknown>).system);
  });

  it('fails with a typed AiOutputError when the re-ask is invalid too (default: one re-ask)', async () => {
    const answers = { person: { text: 'Ada is 36.' }, 'person:reask-1': { text: '{"name":"Ada"}' } };
    const err = await testWorkflow(personWorkflow(), { ai: answers }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isAiOutputError(err)).toBe(true);
    expect(isNonRetriableError(err)).toBe(true);
    expect(err).toMatchObject({
      name: 'AiOutputError',
      code: 'ai_output_invalid',
      stepId: 'person',
      attempts: 2,
      text: '{"name":"Ada"}',
      reason: "(root) must have required property 'age'",
      message: `step.ai.generate("person"): the model's answer does not match the output schema after 2 calls (1 re-ask): (root) must have required property 'age'`,
    });
  });

  it('replays to the same verdict from the memo, and a run with spent re-asks fails (400) rather than being retried', async () => {
    const handler = personWorkflow().handler;
    const input = (steps: Memo): InvokeRequestBody => ({
      event: { name: 'extract', data: {} },
      steps,
      ctx: { runId: 'r', workflow: 'extract', attempt: 0, app: 'default', runner: '' },
    });
    const bad = { data: { text: 'nope', response: {} } };
    const good = { data: { text: '{"name":"Ada","age":36}', response: {} } };
    expect(await executePass(handler, input({ [hashStepId('person')]: bad, [hashStepId('person:reask-1')]: good }))).toMatchObject({
      status: 200,
      body: { data: { output: { name: 'Ada', age: 36 }, reasks: 1 } },
    });
    const failed = await executePass(handler, input({ [hashStepId('person')]: bad, [hashStepId('person:reask-1')]: bad }));
    expect(failed.status).toBe(400);
    expect(failed).toMatchObject({
      body: { error: { message: expect.stringMatching(/does not match the output schema after 2 calls .*the answer is not JSON/) } },
    });
  });

  it('lets the handler catch the AiOutputError and go on', async () => {
    const wf = newRunner().workflow('fallback', async ({ step }) => {
      try {
        return await step.ai.generate('p', { model: 'm', prompt: 'x', output: PERSON });
      } catch (err) {
        return isAiOutputError(err) ? { fallback: (err as AiOutputError).attempts } : 'other';
      }
    });
    const out = await testWorkflow(wf, { ai: () => ({ text: '[]' }) });
    expect(out.result).toEqual({ fallback: 2 });
  });

  it('never re-asks without a schema: the text comes back as it is, and reasks is not sent', async () => {
    const wf = newRunner().workflow('plain', async ({ step }) =>
      step.ai.generate<{ text: string }>('p', { model: 'm', prompt: 'x', reasks: 3 }),
    );
    const out = await testWorkflow(wf, { ai: { p: { text: 'not json at all' } } });
    expect(out.result).toEqual({ text: 'not json at all' });
    expect(infers(out.opcodes)).toEqual([
      { op: 'Infer', id: hashStepId('p'), name: 'p', data: { kind: 'generate', model: 'm', prompt: 'x' } },
    ]);
  });

  it('honours reasks: 0 (no re-ask) and reasks: 2 (a conversation of three answers)', async () => {
    const none = newRunner().workflow('none', async ({ step }) =>
      step.ai.generate('p', { model: 'm', prompt: 'x', output: PERSON, reasks: 0 }),
    );
    await expect(testWorkflow(none, { ai: { p: { text: '{}' } } })).rejects.toMatchObject({ name: 'AiOutputError', attempts: 1 });

    const two = newRunner().workflow('two', async ({ step }) =>
      step.ai.generate('p', { model: 'm', messages: [{ role: 'user', content: 'Ada, 36' }], output: PERSON, reasks: 2 }),
    );
    const out = await testWorkflow(two, {
      ai: { p: { text: '' }, 'p:reask-1': { text: '{"name":1}' }, 'p:reask-2': { text: '```json\n{"name":"Ada","age":36}\n```' } },
    });
    expect(out.result).toMatchObject({ output: { name: 'Ada', age: 36 }, reasks: 2 });
    const last = infers(out.opcodes)[2]?.data as { messages: { role: string; content: string }[] };
    // The empty first answer is not sent back as an (empty) assistant turn.
    const again = (why: string) =>
      `Your previous answer was refused: ${why}. Answer again with JSON only, matching the schema given in the instructions.`;
    expect(last.messages).toEqual([
      { role: 'user', content: 'Ada, 36' },
      { role: 'user', content: again('the answer is empty, not JSON') },
      { role: 'assistant', content: '{"name":1}' },
      { role: 'user', content: again("(root) must have required property 'age'; /name must be string") },
    ]);
  });

  it('takes a Standard Schema: its issues name the re-ask, its output value is the result, its JSON Schema (when it has one) goes in the prompt', async () => {
    const schema: StandardSchemaV1<unknown, { when: Date }> & { '~standard': { jsonSchema: { input: () => JsonSchema } } } = {
      '~standard': {
        version: 1,
        vendor: 'test',
        validate: (v) =>
          typeof (v as { when?: unknown })?.when === 'string' && !Number.isNaN(Date.parse((v as { when: string }).when))
            ? { value: { when: new Date((v as { when: string }).when) } }
            : { issues: [{ message: 'Expected an ISO date', path: ['when'] }] },
        jsonSchema: { input: () => ({ type: 'object', properties: { when: { type: 'string', format: 'date-time' } } }) },
      },
    };
    let seen: unknown;
    const wf = newRunner().workflow('when', async ({ step }) => {
      const r = await step.ai.generate('w', { model: 'm', prompt: 'when?', output: schema });
      seen = r.output.when; // typed from the schema: a Date
      return r.output.when.toISOString();
    });
    const out = await testWorkflow(wf, {
      ai: { w: { text: '{"when":"soon"}' }, 'w:reask-1': { text: '{"when":"2030-01-02T03:04:05Z"}' } },
    });
    expect(out.result).toBe('2030-01-02T03:04:05.000Z');
    expect(seen).toBeInstanceOf(Date);
    const [first, reask] = infers(out.opcodes).map((o) => o.data as { system: string; messages?: { content: string }[] });
    expect(first?.system).toContain('"format":"date-time"');
    expect(reask?.messages?.at(-1)?.content).toContain('output.when: Expected an ISO date');
  });

  it('fails the run at once (400) on an output that is no schema, or a JSON Schema ajv cannot compile', async () => {
    for (const output of [42, { type: 'strng' }]) {
      const r = await executePass(({ step }) => step.ai.generate('p', { model: 'm', prompt: 'x', output: output as JsonSchema }), {
        event: { name: 'e', data: {} },
        steps: {},
        ctx: { runId: 'r', workflow: 'w', attempt: 0, app: 'default', runner: '' },
      });
      expect(r.status).toBe(400);
      expect(r).toMatchObject({
        body: { error: { message: expect.stringMatching(/^step\.ai\.generate\("p"\): output (must be|is not a usable JSON Schema)/) } },
      });
    }
  });
});

describe('output checks', () => {
  it('parses a bare JSON text or one fenced block, and nothing else', () => {
    expect(parseAnswer('  {"a":1}\n')).toEqual({ ok: true, value: { a: 1 } });
    expect(parseAnswer('```json\n[1,2]\n```')).toEqual({ ok: true, value: [1, 2] });
    expect(parseAnswer('```\n"x"\n```')).toEqual({ ok: true, value: 'x' });
    expect(parseAnswer('Here you go: {"a":1}')).toMatchObject({ ok: false, reason: expect.stringMatching(/^the answer is not JSON/) });
    expect(parseAnswer('```json\n{"a":1}\n```\nHope this helps!')).toMatchObject({ ok: false });
    expect(parseAnswer('   ')).toEqual({ ok: false, reason: 'the answer is empty, not JSON' });
  });

  it('validates with the dialect the schema names, formats included, and reports every error', () => {
    const v7 = compileJsonSchema({
      $schema: 'https://json-schema.org/draft-07/schema#',
      type: 'object',
      properties: { email: { type: 'string', format: 'email' } },
    });
    expect(v7({ email: 'ada@example.com' })).toBe(true);
    expect(v7({ email: 'not an email' })).toBe(false);
    expect(formatAjvErrors(v7.errors)).toBe('/email must match format "email"');

    // prefixItems exists in 2020-12 only: under draft-07 it would be ignored and [1, 1] would pass.
    const tuple = compileJsonSchema({
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'array',
      prefixItems: [{ type: 'integer' }, { type: 'string' }],
    });
    expect(tuple([1, 'a'])).toBe(true);
    expect(tuple([1, 1])).toBe(false);

    const v = compileJsonSchema({ ...PERSON, properties: { ...(PERSON.properties as object), mood: { enum: ['happy', 'sad'] } } });
    expect(v({ name: 2, age: -1, mood: 'meh', extra: true })).toBe(false);
    expect(formatAjvErrors(v.errors)).toBe(
      '(root) must NOT have additional properties (extra); /name must be string; /age must be >= 0; /mood must be equal to one of the allowed values (["happy","sad"])',
    );
    expect(() => compileJsonSchema({ type: 'strng' })).toThrow(/output is not a usable JSON Schema/);
  });

  it('compiles two schemas sharing an $id side by side, and an inline schema once per shape', () => {
    const a = compileJsonSchema({ $id: 'https://example.com/s', type: 'string' });
    const b = compileJsonSchema({ $id: 'https://example.com/s', type: 'number' });
    expect([a('x'), b('x'), b(1)]).toEqual([true, false, true]);
    expect(compileJsonSchema({ $id: 'https://example.com/s', type: 'string' })).toBe(a);
  });

  it('is an AiOutputError by marker, not by class', () => {
    const err = new AiOutputError('s', 3, 'x', 'why');
    expect(err.message).toBe(`step.ai.generate("s"): the model's answer does not match the output schema after 3 calls (2 re-asks): why`);
    expect(isAiOutputError({ name: 'AiOutputError', message: err.message })).toBe(false);
    // Another copy of the SDK marks its errors the same way.
    expect(isAiOutputError(Object.assign(new Error('x'), { [Symbol.for('dws.sdk.aiOutputInvalid')]: true }))).toBe(true);
    expect(isAiOutputError(new Error('x'))).toBe(false);
    expect(isAiOutputError(err)).toBe(true);
  });
});
