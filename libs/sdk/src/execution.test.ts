import { describe, expect, it } from '@jest/globals';
import { hashStepId, type InvokeRequestBody, type Memo, type StepRunOpcode } from '@dws/protocol';
import { NonRetriableError, RetryAfterError } from './errors.js';
import { executePass as runPass, type ExecuteOptions } from './execution.js';
import type { WorkflowHandler } from './types.js';

// These tests pin the one-new-step-per-pass semantics; running ahead has its own block.
const executePass = (h: WorkflowHandler, i: InvokeRequestBody, o: ExecuteOptions = { stepBudgetMs: 0 }) => runPass(h, i, o);

const input = (steps: Memo = {}, data: unknown = {}): InvokeRequestBody => ({
  event: { name: 'test/event', data },
  steps,
  ctx: { runId: 'run_1', workflow: 'wf', attempt: 0, app: 'default', runner: '' },
});
const memoOf = (entries: Record<string, Memo[string]>): Memo =>
  Object.fromEntries(Object.entries(entries).map(([name, e]) => [hashStepId(name), e]));

describe('executePass', () => {
  it('runs the first new step and does not start the next: 206 with one StepRun', async () => {
    const calls: string[] = [];
    const handler: WorkflowHandler = async ({ step }) => {
      const a = await step.run('a', () => {
        calls.push('a');
        return 1;
      });
      calls.push(`after a=${a}`);
      return step.run('b', () => calls.push('b'));
    };
    const r = await executePass(handler, input());
    expect(r.status).toBe(206);
    expect(r.body).toEqual({ opcodes: [{ op: 'StepRun', id: hashStepId('a'), name: 'a', data: 1, startedAtMs: expect.any(Number) }], logs: [] });
    expect(calls).toEqual(['a', 'after a=1']);
  });

  it('a handler that returns right after its last step ends in that pass: 200 carrying the step', async () => {
    const handler: WorkflowHandler = async ({ step }) => {
      const a = await step.run('a', () => 1);
      const b = await step.run('b', () => a + 1);
      return { b };
    };
    const r = await executePass(handler, input(memoOf({ a: { data: 1 } })));
    expect(r).toEqual({ status: 200, body: { data: { b: 2 }, logs: [], opcodes: [{ op: 'StepRun', id: hashStepId('b'), name: 'b', data: 2, startedAtMs: expect.any(Number) }] } });
    // A failed step is never final (it may be retried), a parking step needs the service: both stay 206.
    const failing = await executePass(async ({ step }) => step.run('a', () => { throw new Error('no'); }).catch(() => 'caught'), input());
    expect(failing.status).toBe(206);
    const sleeping = await executePass(async ({ step }) => { await step.run('a', () => 1); await step.sleep('nap', 10); return 1; }, input());
    expect(sleeping).toMatchObject({ status: 206, body: { opcodes: [{ name: 'a' }] } });
    // Step and result that do not fit one 1 MiB reply together: the step now, the result on the next pass.
    const big = 'x'.repeat(600 * 1024);
    const bulky = await executePass(async ({ step }) => ({ again: await step.run('big', () => big) }), input());
    expect(bulky).toMatchObject({ status: 206, body: { opcodes: [{ name: 'big' }] } });
  });

  it('replays memoized steps without running them and returns 200', async () => {
    let ran = 0;
    const handler: WorkflowHandler = async ({ step }) => {
      const a = await step.run('a', () => ++ran);
      const b = await step.run('b', () => ++ran);
      return { a, b };
    };
    const r = await executePass(handler, input(memoOf({ a: { data: 10 }, b: { data: { deep: [1] } } })));
    expect(r).toEqual({ status: 200, body: { data: { a: 10, b: { deep: [1] } }, logs: [] } });
    expect(ran).toBe(0);
  });

  it('reports every step discovered in one tick (Promise.all) in one 206', async () => {
    const handler: WorkflowHandler = async ({ step }) => {
      const first = await step.run('first', () => 'f');
      const [x, y, z] = await Promise.all([
        step.run('x', async () => {
          await new Promise((r) => setTimeout(r, 20));
          return 'x';
        }),
        step.run('y', () => 'y'),
        // A branch that must first get past a memoized step.
        (async () => {
          await step.run('pre', () => 'never: memoized');
          return step.run('z', () => 'z');
        })(),
      ]);
      return [first, x, y, z];
    };
    const r = await executePass(handler, input(memoOf({ first: { data: 'f' }, pre: { data: 'p' } })));
    // The handler returned after them, so the pass ends the run: 200 carrying them.
    expect(r).toMatchObject({ status: 200, body: { data: ['f', 'x', 'y', 'z'] } });
    const ops = (r.body as { opcodes: StepRunOpcode[] }).opcodes;
    expect(ops.map((o) => [o.name, o.data])).toEqual([
      ['x', 'x'],
      ['y', 'y'],
      ['z', 'z'],
    ]);
  });

  it('disambiguates duplicate step ids positionally: x, x:1, x:2', async () => {
    const handler: WorkflowHandler = async ({ step }) =>
      Promise.all([step.run('x', () => 0), step.run('x', () => 1), step.run('x', () => 2)]);
    const r = await executePass(handler, input());
    const ops = (r.body as { opcodes: StepRunOpcode[] }).opcodes;
    expect(ops.map((o) => ({ name: o.name, id: o.id, data: o.data }))).toEqual([
      { name: 'x', id: hashStepId('x'), data: 0 },
      { name: 'x:1', id: hashStepId('x:1'), data: 1 },
      { name: 'x:2', id: hashStepId('x:2'), data: 2 },
    ]);
  });

  it('JSON-normalises step data: undefined -> null, Date -> string', async () => {
    const handler: WorkflowHandler = async ({ step }) =>
      Promise.all([
        step.run('u', () => undefined),
        step.run('d', () => new Date(0)),
        step.run('o', () => ({ a: undefined, b: 1 })),
      ]);
    const r = await executePass(handler, input());
    const ops = (r.body as { opcodes: StepRunOpcode[] }).opcodes;
    expect(ops.map((o) => o.data)).toEqual([null, '1970-01-01T00:00:00.000Z', { b: 1 }]);
    expect(ops.every((o) => 'data' in o)).toBe(true);
  });

  it('records declared input', async () => {
    const handler: WorkflowHandler = ({ step }) => step.run('a', () => 1, { input: { n: 1 } });
    const r = await executePass(handler, input());
    expect((r.body as { opcodes: StepRunOpcode[] }).opcodes[0]).toMatchObject({ input: { n: 1 }, data: 1 });
  });

  it('reports a throwing step as a retriable StepRun error', async () => {
    const handler: WorkflowHandler = ({ step }) =>
      step.run('boom', () => {
        throw new Error('kaput');
      });
    const r = await executePass(handler, input());
    expect(r.status).toBe(206);
    const op = (r.body as { opcodes: StepRunOpcode[] }).opcodes[0]!;
    expect(op).toMatchObject({ op: 'StepRun', name: 'boom', error: { message: 'kaput' }, retriable: true });
    expect(op.error?.stack).toContain('kaput');
    expect('data' in op).toBe(false);
  });

  it('flags NonRetriableError with retriable: false and RetryAfterError with retryAfterMs', async () => {
    const handler: WorkflowHandler = ({ step }) =>
      Promise.all([
        step.run('nr', () => {
          throw new NonRetriableError('bad input');
        }),
        step.run('ra', async () => {
          throw new RetryAfterError('slow down', 1500);
        }),
      ]);
    const r = await executePass(handler, input());
    const [nr, ra] = (r.body as { opcodes: StepRunOpcode[] }).opcodes;
    expect(nr).toMatchObject({ error: { message: 'bad input' }, retriable: false });
    expect(nr!.retryAfterMs).toBeUndefined();
    expect(ra).toMatchObject({ error: { message: 'slow down' }, retriable: true, retryAfterMs: 1500 });
  });

  it('rejects step.run with the memoized error; escaping the handler gives 400', async () => {
    const handler: WorkflowHandler = async ({ step }) => {
      await step.run('a', () => 'never');
      return 'unreachable';
    };
    const r = await executePass(
      handler,
      input(memoOf({ a: { error: { message: 'it broke', stack: 'Error: it broke\n    at remote' } } })),
    );
    expect(r.status).toBe(400);
    expect(r.body).toEqual({ error: { message: 'it broke', stack: 'Error: it broke\n    at remote' }, logs: [] });
  });

  it('lets the handler catch a memoized step error and carry on', async () => {
    const handler: WorkflowHandler = async ({ step }) => {
      try {
        await step.run('a', () => 'never');
      } catch (err) {
        return { recovered: (err as Error).message, name: (err as Error).name };
      }
      return 'no';
    };
    const r = await executePass(handler, input(memoOf({ a: { error: { message: 'x' } } })));
    expect(r).toEqual({ status: 200, body: { data: { recovered: 'x', name: 'StepFailedError' }, logs: [] } });
  });

  it('answers 400 for a NonRetriableError thrown by the handler, 500 for any other throw', async () => {
    const nr = await executePass(() => {
      throw new NonRetriableError('no way');
    }, input());
    expect(nr.status).toBe(400);
    expect(nr.body).toMatchObject({ error: { message: 'no way' }, logs: [] });

    const other = await executePass(async () => {
      throw new Error('transient');
    }, input());
    expect(other.status).toBe(500);
    expect(other.body).toMatchObject({ error: { message: 'transient' } });
  });

  it('never resolves a pending step: 206 with no opcodes when nothing else can run', async () => {
    let after = false;
    const r = await executePass(
      async ({ step }) => {
        await step.run('sleeping', () => 'never');
        after = true;
      },
      input({ [hashStepId('sleeping')]: { pending: true } }),
    );
    expect(r).toEqual({ status: 206, body: { opcodes: [], logs: [] } });
    expect(after).toBe(false);
  });

  it('runs a parallel branch next to a pending one', async () => {
    const r = await executePass(
      ({ step }) => Promise.all([step.run('waiting', () => 'never'), step.run('other', () => 'ok')]),
      input({ [hashStepId('waiting')]: { pending: true } }),
    );
    expect((r.body as { opcodes: StepRunOpcode[] }).opcodes.map((o) => o.name)).toEqual(['other']);
  });

  it('reports an un-awaited step even though the handler returned', async () => {
    const handler: WorkflowHandler = ({ step }) => {
      void step.run('fire', () => 'and forget');
      return 'done';
    };
    const first = await executePass(handler, input());
    expect(first).toEqual({ status: 200, body: { data: 'done', logs: [], opcodes: [{ op: 'StepRun', id: hashStepId('fire'), name: 'fire', data: 'and forget', startedAtMs: expect.any(Number) }] } });
    const later = await executePass(handler, input(memoOf({ fire: { data: 'and forget' } })));
    expect(later).toEqual({ status: 200, body: { data: 'done', logs: [] } });
    // One that fails is reported for the service to retry or fail: 206.
    const failing = await executePass(({ step }) => {
      void step.run('fire', () => { throw new Error('no'); }).catch(() => undefined);
      return 'done';
    }, input());
    expect(failing.status).toBe(206);
  });

  it('refuses nested steps', async () => {
    const r = await executePass(({ step }) => step.run('outer', () => step.run('inner', () => 1)), input());
    const op = (r.body as { opcodes: StepRunOpcode[] }).opcodes[0]!;
    expect(op).toMatchObject({ name: 'outer', retriable: false });
    expect(op.error?.message).toMatch(/cannot be nested/);
  });

  it('fails a step whose result is not JSON-serialisable, non-retriably', async () => {
    const r = await executePass(({ step }) => step.run('big', () => 10n), input());
    expect((r.body as { opcodes: StepRunOpcode[] }).opcodes[0]).toMatchObject({ retriable: false });
  });

  it('does not run steps reached after the reply was decided', async () => {
    let lateRan = false;
    const r = await executePass(async ({ step }) => {
      void (async () => {
        await new Promise((res) => setTimeout(res, 30));
        await step.run('late', () => {
          lateRan = true;
        });
      })();
      return step.run('now', () => 1);
    }, input());
    expect((r.body as { opcodes: StepRunOpcode[] }).opcodes.map((o) => o.name)).toEqual(['now']);
    await new Promise((res) => setTimeout(res, 50));
    expect(lateRan).toBe(false);
  });

  it('does not crash the process on a memoized failure the handler never awaited', async () => {
    const r = await executePass(
      async ({ step }) => {
        const a = step.run('a', () => 1);
        await step.run('b', () => 2);
        return a;
      },
      input(memoOf({ a: { error: { message: 'x' } } })),
    );
    expect(r.status).toBe(206);
  });
});

describe('logger', () => {
  it('scopes lines to the enclosing step with per-scope counters, and only sends code that ran', async () => {
    const handler: WorkflowHandler = async ({ step, logger }) => {
      logger.info('start');
      await step.run('a', () => {
        logger.info('inside a');
      });
      await step.run('b', () => {
        logger.debug('inside b', { n: 1 });
        logger.warn('inside b again');
      });
      logger.info('end');
      await step.run('c', () => {
        logger.info('inside c');
      });
      return 'ok';
    };
    const pass1 = await executePass(handler, input(memoOf({ a: { data: null } })));
    expect(pass1.status).toBe(206);
    expect(
      pass1.body.logs.map(({ level, message, scope, index, fields }) => ({ level, message, scope, index, fields })),
    ).toEqual([
      { level: 'info', message: 'start', scope: '@root', index: 0, fields: undefined },
      { level: 'debug', message: 'inside b', scope: 'b', index: 0, fields: { n: 1 } },
      { level: 'warn', message: 'inside b again', scope: 'b', index: 1, fields: undefined },
      { level: 'info', message: 'end', scope: '@root', index: 1, fields: undefined },
    ]);
    expect(typeof pass1.body.logs[0]!.tsMs).toBe('number');

    const pass2 = await executePass(handler, input(memoOf({ a: { data: null }, b: { data: null }, c: { data: null } })));
    expect(pass2.body.logs.map((l) => [l.scope, l.index, l.message])).toEqual([
      ['@root', 0, 'start'],
      ['@root', 1, 'end'],
    ]);
  });

  it('redacts sensitive fields before they leave the runner', async () => {
    const r = await executePass(async ({ logger }) => {
      logger.info('login', {
        user: 'ann',
        password: 'hunter2',
        API_KEY: 'k',
        nested: { Authorization: 'Bearer x', list: [{ refreshToken: 'r', ok: 1 }], cookie: 'c' },
      });
      return null;
    }, input());
    expect(r.body.logs[0]!.fields).toEqual({
      user: 'ann',
      password: '[REDACTED]',
      API_KEY: '[REDACTED]',
      nested: { Authorization: '[REDACTED]', list: [{ refreshToken: '[REDACTED]', ok: 1 }], cookie: '[REDACTED]' },
    });
  });

  it('warns, without failing, when a finished run skipped memoized steps', async () => {
    const r = await executePass(
      async ({ step }) => step.run('a', () => 1),
      input(memoOf({ a: { data: 1 }, gone: { data: 2 } })),
    );
    expect(r.status).toBe(200);
    expect(r.body.logs).toHaveLength(1);
    expect(r.body.logs[0]).toMatchObject({ level: 'warn', scope: '@root', fields: { count: 1 } });
    expect(r.body.logs[0]!.message).toBe(`memo entries never reached: ${hashStepId('gone')}`);
  });
});
