import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Gates } from '@dws/testing';
import { api, eventually, Terminal } from '../src/api.js';
import { startDeployment, type Deployment, type Mode } from '../src/deployment.js';
import { anthropicMessage, startFakeModel } from '../src/fake-model.js';
import { realInfra } from '../src/infra.js';
import { startRunner, type TestRunner } from '../src/runner.js';

/**
 * Flow control across ingest and the scheduler, through the public API: the
 * fields ingest computes at admission (concurrency key and limit, singleton
 * key) enforced by the scheduler on real runs. A concurrency limit counts
 * runs executing (Inngest's step concurrency): "inside" is inside a step, and
 * a run that sleeps between its steps gives its slot back meanwhile.
 */
const modes: Mode[] = realInfra() ? ['fleet', 'embedded'] : ['embedded'];
/** Runs per mode: PGlite drives them one transaction at a time (500 take about 90 s there on 2 idle cores). */
const RUNS: Partial<Record<Mode, number>> = { fleet: 500, embedded: 150 };
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(modes)('flow control end to end on %s', (mode) => {
  let dep: Deployment;
  let runner: TestRunner;
  const inside = new Set<string>();
  let maxInside = 0;
  const done = new Set<string>();
  let releaseSingleton: (() => void) | undefined;
  const gates = new Gates();
  let afterNap = 0;
  const spreadAt: number[] = [];
  // Two constraints: runs inside per user, and in all.
  const perUser = new Map<string, number>();
  let pairInside = 0;
  let maxPair = 0;
  let maxPerUser = 0;
  // A shared (env) key: runs of two workflows inside at once.
  let sharedInside = 0;
  let maxShared = 0;
  const sharedBy = new Set<string>();
  // A queued singleton: runs of one user active at once (from their first step to their last), and in all.
  const activeOf = new Map<string, number>();
  let maxActiveOfUser = 0;
  let activeInTurn = 0;
  let maxActiveInTurn = 0;
  const turnOrder: string[] = [];
  // Model calls the service makes for infer steps, at the provider at once.
  let model: Awaited<ReturnType<typeof startFakeModel>>;
  let modelInFlight = 0;
  let maxModelInFlight = 0;
  // Children (step.runWorkflow) of a per-user limited workflow: inside a step at once, per user.
  const childInside = new Map<string, number>();
  let maxChildPerUser = 0;
  // A limit-1 workflow's runs and its onFailure runs: inside a step at once.
  let fragileInside = 0;
  let maxFragileInside = 0;
  let mopped = 0;

  beforeAll(async () => {
    model = await startFakeModel(async ({ body }) => {
      maxModelInFlight = Math.max(maxModelInFlight, ++modelInFlight);
      await pause(300);
      modelInFlight--;
      return anthropicMessage(body.model, 'ok');
    });
    dep = await startDeployment(mode, { env: { SERVICE_ANTHROPIC_BASE_URL: model.url, SERVICE_ANTHROPIC_API_KEY: 'sk-ant-e2e' } });
    runner = await startRunner(dep, (r) => {
      // Inside a step for a while, a sleep (the slot given back), then inside another step: admitted again.
      const limitedStep = (runId: string, ms: number) => async () => {
        inside.add(runId);
        maxInside = Math.max(maxInside, inside.size);
        await pause(ms);
        inside.delete(runId);
        return true;
      };
      r.workflow('limited', { triggers: [{ event: 'limited.go' }], concurrency: { limit: 3 } }, async ({ step, ctx }) => {
        await step.run('work', limitedStep(ctx.runId, 20));
        await step.sleep('rest', 20);
        await step.run('again', limitedStep(ctx.runId, 5));
        await step.run('leave', () => (done.add(ctx.runId), true));
      });
      r.workflow(
        'per-user',
        { triggers: [{ event: 'per-user.go' }], concurrency: [{ limit: 4 }, { limit: 1, key: 'event.data.user' }] },
        async ({ event, step }) => {
          const user = (event.data as { user: string }).user;
          const work = async () => {
            perUser.set(user, (perUser.get(user) ?? 0) + 1);
            maxPerUser = Math.max(maxPerUser, perUser.get(user)!);
            maxPair = Math.max(maxPair, ++pairInside);
            await pause(30);
            perUser.set(user, perUser.get(user)! - 1);
            pairInside--;
            return true;
          };
          await step.run('work', work);
          await step.sleep('rest', 10);
          await step.run('again', work);
        },
      );
      for (const name of ['share-a', 'share-b']) {
        r.workflow(name, { triggers: [{ event: `${name}.go` }], concurrency: { limit: 2, key: '"model-api"', scope: 'env' } }, async ({ step }) => {
          await step.run('call', async () => {
            maxShared = Math.max(maxShared, ++sharedInside);
            sharedBy.add(name);
            await pause(30);
            return --sharedInside;
          });
        });
      }
      // One run per user at a time, sleeps included: the rest wait their turn.
      r.workflow('in-turn', { triggers: [{ event: 'in-turn.go' }], singleton: { key: 'event.data.user', mode: 'queue' } }, async ({ event, step, ctx }) => {
        const user = (event.data as { user: string }).user;
        await step.run('in', () => {
          turnOrder.push(ctx.runId);
          activeOf.set(user, (activeOf.get(user) ?? 0) + 1);
          maxActiveOfUser = Math.max(maxActiveOfUser, activeOf.get(user)!);
          maxActiveInTurn = Math.max(maxActiveInTurn, ++activeInTurn);
          return true;
        });
        // Long enough that bob's run starts while ada's naps, on a loaded machine too.
        await step.sleep('nap', '1s');
        await step.run('out', () => {
          activeOf.set(user, activeOf.get(user)! - 1);
          activeInTurn--;
          return true;
        });
      });
      // A key meant to bound a model API: the service's own model calls (step.ai) hold the slot while out.
      r.workflow('ask', { triggers: [{ event: 'ask.go' }], concurrency: { limit: 1, key: '"llm-api"', scope: 'env' } }, async ({ step }) => {
        await step.ai.generate('ask', { model: 'claude-e2e', prompt: 'hi', maxTokens: 8 });
        await step.sleep('rest', 10);
      });
      // A throttle with a concurrency limit: the slots are free, the throttle still spreads the starts.
      r.workflow('spread', { triggers: [{ event: 'spread.go' }], throttle: { limit: 1, period: '1500ms' }, concurrency: { limit: 5 } }, async ({ step }) => {
        await step.run('go', () => (spreadAt.push(Date.now()), true));
      });
      // Limit 1: a sleeper, and a holder that stays inside its step until the test opens its gate.
      r.workflow('one-slot', { triggers: [{ event: 'one-slot.go' }], concurrency: { limit: 1 } }, async ({ event, step }) => {
        const { role } = event.data as { role: string };
        if (role === 'holder') return step.run('hold', async () => (await gates.wait(`${mode}-holder`), true));
        await step.run('before', () => true);
        // Long enough for the holder to be admitted first on a loaded machine (the sleeper, older, would win a tie).
        await step.sleep('nap', '3s');
        return step.run('after', () => (afterNap = Date.now()));
      });
      // A parent fans out to four children, two per user; the child workflow allows one per user at once.
      r.workflow('user-job', { concurrency: { limit: 1, key: 'event.data.user' } }, async ({ event, step }) => {
        const { user } = event.data as { user: string };
        return step.run('work', async () => {
          childInside.set(user, (childInside.get(user) ?? 0) + 1);
          maxChildPerUser = Math.max(maxChildPerUser, childInside.get(user)!);
          await pause(200);
          childInside.set(user, childInside.get(user)! - 1);
          return user;
        });
      });
      r.workflow('fan-out', { triggers: [{ event: 'fan-out.go' }] }, async ({ step }) =>
        Promise.all(['ada', 'bob', 'ada', 'bob'].map((user, i) => step.runWorkflow(`job-${i}`, { workflow: 'user-job', data: { user } }))),
      );
      // Limit 1 and an onFailure handler: the handler's runs take the slot too.
      const fragileStep = async () => {
        maxFragileInside = Math.max(maxFragileInside, ++fragileInside);
        await pause(200);
        fragileInside--;
      };
      r.workflow(
        'fragile',
        {
          triggers: [{ event: 'fragile.go' }],
          concurrency: { limit: 1 },
          onFailure: async ({ step }) => step.run('mop', async () => (await fragileStep(), ++mopped)),
        },
        async ({ step }) =>
          step.run('try', async () => {
            await fragileStep();
            throw new Error('down');
          }),
      );
      // A singleton that stays inside its step until the test opens the gate its event names.
      r.workflow('solo', { triggers: [{ event: 'solo.go' }], singleton: { key: 'event.data.user', mode: 'skip' } }, async ({ event, step }) =>
        step.run('hold', async () => (await gates.wait((event.data as { gate: string }).gate), true)),
      );
      r.workflow('only-one', { triggers: [{ event: 'only.go' }], singleton: { key: 'event.data.user', mode: 'skip' } }, async ({ step }) => {
        await step.run('wait', () => new Promise<boolean>((res) => (releaseSingleton = () => res(true))));
      });
    });
  }, 120_000);

  afterAll(async () => {
    releaseSingleton?.();
    gates.openAll();
    await runner?.close();
    await dep?.stop();
    await model?.close();
  }, 60_000);

  /** Every run the POSTs started succeeds (one that ended otherwise fails the test at once). */
  const allSucceed = async (what: string, sent: { status: number; body: any }[]) => {
    const ids = sent.map((r) => {
      expect(r.status).toBe(202);
      return r.body.runId as string;
    });
    await eventually(
      `${what} to succeed`,
      async () => {
        for (const id of ids) {
          const r = await api(dep.base, 'GET', `/v1/runs/${id}`, { key: dep.secretKey });
          if (['failed', 'cancelled'].includes(r.body.status)) throw new Terminal(`run ${id} ended ${r.body.status}`);
          if (r.body.status !== 'succeeded') return undefined;
        }
        return true;
      },
      120_000,
    );
  };

  it(`${RUNS[mode]} events at once against concurrency { limit: 3 }: never more than 3 inside a run, and all finish`, async () => {
    const N = RUNS[mode] ?? 150;
    const ids: string[] = [];
    // 500 POSTs, 50 in flight at a time (the client side of "at once").
    let next = 0;
    await Promise.all(
      Array.from({ length: 50 }, async () => {
        while (next < N) {
          next++;
          const r = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'limited.go', data: {} } });
          expect(r.status).toBe(202);
          ids.push(r.body.runId as string);
        }
      }),
    );
    expect(new Set(ids).size).toBe(N);
    const t0 = Date.now();
    let checkedAt = 0;
    const failedRun = async (status: 'failed' | 'cancelled') =>
      (await api(dep.base, 'GET', `/v1/runs?status=${status}&q=limited&limit=1`, { key: dep.secretKey })).body?.[0] as { id: string; error?: unknown } | undefined;
    await eventually('all runs done', async () => {
      if (ids.every((id) => done.has(id))) return true;
      // A run that ended otherwise will never be done: say so at once (asked every 2 s, not on every poll of 500 runs).
      if (Date.now() - checkedAt > 2000) {
        checkedAt = Date.now();
        for (const status of ['failed', 'cancelled'] as const) {
          const bad = await failedRun(status);
          if (bad) throw new Terminal(`run ${bad.id} ended ${status}: ${JSON.stringify(bad.error ?? null)}`);
        }
      }
      return undefined;
    }, 600_000).catch((err: unknown) => {
      throw new Error(`${done.size} of ${N} done after ${Date.now() - t0} ms: ${(err as Error).message}`);
    });
    expect(maxInside).toBeGreaterThan(1);
    expect(maxInside).toBeLessThanOrEqual(3);
  }, 660_000);

  it('replays take their source runs\' concurrency: ten replayed at once never have more than 3 inside', async () => {
    const sent = await Promise.all(Array.from({ length: 10 }, () => api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'limited.go', data: {} } })));
    await allSucceed('the runs to replay', sent);
    maxInside = 0;
    const replays = await Promise.all(sent.map((r) => api(dep.base, 'POST', `/v1/runs/${r.body.runId}/replay`, { key: dep.secretKey })));
    expect(replays.map((r) => r.status)).toEqual(Array(10).fill(201));
    await allSucceed('the replays', replays.map((r) => ({ status: 202, body: { runId: r.body.id } })));
    expect(maxInside).toBeGreaterThan(0);
    expect(maxInside).toBeLessThanOrEqual(3);
  }, 120_000);

  it("children take their workflow's concurrency, keyed on their input: four children of one parent, never two of a user's inside at once", async () => {
    const sent = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'fan-out.go', data: {} } });
    await allSucceed('the parent', [sent]);
    const parent = (await api(dep.base, 'GET', `/v1/runs/${sent.body.runId}`, { key: dep.secretKey })).body;
    expect([parent.result, maxChildPerUser]).toEqual([['ada', 'bob', 'ada', 'bob'], 1]);
  }, 60_000);

  it("onFailure runs take the failed run's concurrency: three failing runs of a limit-1 workflow and their handlers, never two inside at once", async () => {
    const sent = await Promise.all(Array.from({ length: 3 }, () => api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'fragile.go', data: {} } })));
    expect(sent.map((r) => r.status)).toEqual([202, 202, 202]);
    await eventually('the three handlers to mop up', async () => (mopped === 3 ? true : undefined), 60_000);
    expect(maxFragileInside).toBe(1);
  }, 90_000);

  it('a sleeping run gives its slot back: another runs meanwhile; once its nap is over it waits for the slot, then goes on', async () => {
    const send = async (role: string) => {
      const r = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'one-slot.go', data: { role } } });
      expect(r.status).toBe(202);
      return r.body.runId as string;
    };
    const read = async (id: string) => (await api(dep.base, 'GET', `/v1/runs/${id}`, { key: dep.secretKey })).body;
    const sleeper = await send('sleeper');
    await eventually('the sleeper to sleep', async () => ((await read(sleeper)).waitingFor?.kind === 'sleep' ? true : undefined));
    // Limit 1, and the sleeper holds no slot: the holder is admitted and executes its step.
    const holder = await send('holder');
    await eventually('the holder to run', async () => ((await read(holder)).status === 'running' ? true : undefined));
    // The nap over, the sleeper does not go on while the holder is inside its step: it waits for the slot, and says so.
    const waiting = await eventually('the sleeper to wait for the slot', async () => {
      const r = await read(sleeper);
      return r.waitingFor?.kind === 'concurrency' ? r : undefined;
    });
    expect([waiting.status, waiting.waitingFor]).toEqual(['waiting', { kind: 'concurrency', key: '', limit: 1, holding: 1 }]);
    await pause(300); // deliberately: time for a step that must not run while the slot is held
    expect(afterNap).toBe(0);
    const opened = Date.now();
    gates.open(`${mode}-holder`);
    for (const id of [holder, sleeper]) await eventually(`${id} to succeed`, async () => ((await read(id)).status === 'succeeded' ? true : undefined));
    expect(afterNap).toBeGreaterThanOrEqual(opened);
  }, 60_000);

  it("a run keeps its slot while the service makes its model call: a key meant to bound a model API bounds step.ai's calls", async () => {
    const sent = await Promise.all(Array.from({ length: 3 }, () => api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'ask.go', data: {} } })));
    await allSucceed('the runs asking the model', sent);
    // Each call is held 300 ms at the provider; the sleep after it gives the slot to the next run.
    expect([model.calls.length, maxModelInFlight]).toEqual([3, 1]);
  }, 60_000);

  it("singleton queue: one run per user at a time from its first step to its last, sleeps included, in the order they came; other users' meanwhile", async () => {
    const sent: { status: number; body: any }[] = [];
    for (const user of ['ada', 'bob', 'ada', 'bob', 'ada']) {
      sent.push(await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'in-turn.go', data: { user } } }));
    }
    const ids = sent.map((r) => r.body.runId as string);
    // Ada's third waits behind the run of her key active now, and says which.
    const behind = await eventually('the last run to wait behind an active one', async () => {
      const w = (await api(dep.base, 'GET', `/v1/runs/${ids[4]}`, { key: dep.secretKey })).body.waitingFor;
      return w?.kind === 'singleton' ? w : undefined;
    });
    expect([behind.key, [ids[0], ids[2]].includes(behind.activeRunId)]).toEqual(['ada', true]);
    await allSucceed('the runs in turn', sent);
    expect([maxActiveOfUser, maxActiveInTurn]).toEqual([1, 2]);
    expect(turnOrder.filter((id) => [ids[0], ids[2], ids[4]].includes(id))).toEqual([ids[0], ids[2], ids[4]]);
  }, 60_000);

  it('a throttle holds with a concurrency limit beside it: three events at once start 1.5 s apart though five slots are free', async () => {
    const sent = await Promise.all(Array.from({ length: 3 }, () => api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'spread.go', data: {} } })));
    await allSucceed('the throttled runs', sent);
    const at = [...spreadAt].sort((a, b) => a - b);
    expect(at).toHaveLength(3);
    // One per 1.5 s (a little slack for the admission round that starts each).
    expect([at[1]! - at[0]! >= 1300, at[2]! - at[1]! >= 1300]).toEqual([true, true]);
  }, 60_000);

  it('singleton skip: while a run of the key is active, events for it are skipped; others start', async () => {
    const first = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'only.go', data: { user: 'ada' } } });
    expect(first.body).toMatchObject({ skipped: false, runId: expect.any(String) });
    await eventually('the first run to be active', async () => {
      const r = await api(dep.base, 'GET', `/v1/runs/${first.body.runId}`, { key: dep.secretKey });
      return r.status === 200 && releaseSingleton ? true : undefined;
    });
    const burst = await Promise.all(
      Array.from({ length: 20 }, () => api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'only.go', data: { user: 'ada' } } })),
    );
    expect(burst.every((r) => r.body.skipped === true && r.body.runId === undefined)).toBe(true);
    const other = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'only.go', data: { user: 'bob' } } });
    expect(other.body).toMatchObject({ skipped: false, runId: expect.any(String) });
  }, 60_000);

  it("a replay is a run of its singleton key: refused (409) while another run of the key is active; running, it skips the key's events", async () => {
    const user = `solo-${mode}`;
    const send = (gate: string) => api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'solo.go', data: { user, gate } } });
    const status = async (id: string) => (await api(dep.base, 'GET', `/v1/runs/${id}`, { key: dep.secretKey })).body.status as string;
    const reached = (id: string, want: string) => eventually(`${id} ${want}`, async () => ((await status(id)) === want ? true : undefined), 60_000);
    const replay = (id: string, input: unknown) => api(dep.base, 'POST', `/v1/runs/${id}/replay`, { key: dep.secretKey, body: { input } });

    const first = (await send(`${mode}-first`)).body.runId as string;
    gates.open(`${mode}-first`);
    await reached(first, 'succeeded');
    const active = (await send(`${mode}-active`)).body.runId as string;
    await reached(active, 'running');
    const refused = await replay(first, { user, gate: `${mode}-replay` });
    expect({ status: refused.status, code: refused.body.error?.code }).toEqual({ status: 409, code: 'singleton_active' });
    expect(refused.body.error.message).toContain(active);
    gates.open(`${mode}-active`);
    await reached(active, 'succeeded');

    const replayed = await replay(first, { user, gate: `${mode}-replay` });
    expect(replayed.status).toBe(201);
    await reached(replayed.body.id, 'running');
    expect((await send(`${mode}-later`)).body).toMatchObject({ skipped: true });
    gates.open(`${mode}-replay`);
    await reached(replayed.body.id, 'succeeded');
    expect((await send(`${mode}-after`)).body).toMatchObject({ skipped: false, runId: expect.any(String) });
    gates.open(`${mode}-after`);
  }, 120_000);

  it('two constraints (4 in all, 1 per user): neither is ever passed, and every run finishes', async () => {
    const users = ['ada', 'bob', 'cy', 'dee', 'eve', 'fay', 'gus', 'hal'];
    // Each user's five events together: admitted by the first constraint alone, one user's runs would fill all four slots.
    const sent = await Promise.all(
      Array.from({ length: 40 }, (_, i) => api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'per-user.go', data: { user: users[Math.floor(i / 5)] } } })),
    );
    await allSucceed('the per-user runs', sent);
    expect([maxPair > 1, maxPair <= 4, maxPerUser]).toEqual([true, true, 1]);
  }, 180_000);

  it('a key shared by two workflows (scope env): never more than its limit inside runs of either, and all finish', async () => {
    const sent = await Promise.all(
      Array.from({ length: 20 }, (_, i) => api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: i % 2 ? 'share-a.go' : 'share-b.go', data: {} } })),
    );
    await allSucceed('the shared-key runs', sent);
    // Each workflow alone could have two inside: four at once, were the slots not shared.
    expect([maxShared, [...sharedBy].sort()]).toEqual([2, ['share-a', 'share-b']]);
  }, 180_000);

  it("refuses a third constraint, Inngest's account scope, a keyless env scope and a queued singleton beside concurrency at registration with a 400", async () => {
    for (const [flow, message] of [
      [{ concurrency: [{ limit: 1 }, { limit: 2, key: 'event.data.a' }, { limit: 3, key: 'event.data.b' }] }, 'concurrency: at most 2 constraints.'],
      [{ concurrency: { limit: 2, key: 'event.data.user', scope: 'account' } }, '"account" is not supported.'],
      [{ concurrency: { limit: 2, scope: 'env' } }, 'concurrency.key is required with scope "env"'],
      [{ concurrency: { limit: 2 }, singleton: { mode: 'queue' } }, 'singleton mode "queue" cannot be combined with concurrency'],
    ] as const) {
      const bad = await api(dep.base, 'POST', '/v1/register', {
        key: dep.secretKey,
        body: { app: 'flow-bad', url: 'http://127.0.0.1:9/invoke', workflows: [{ name: 'w', ...flow }] },
      });
      expect(bad.status).toBe(400);
      expect(bad.body.error.message).toContain(message);
    }
  });
});
