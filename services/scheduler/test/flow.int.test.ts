import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { Gates } from '@dws/testing';
import { create, fromBinary, ResolveStepSchema, StepHandoffSchema, toBinary } from '@dws/proto';
import { streams, subjects } from '@dws/runtime';
import { admitKey } from '../src/store/flow.js';
import { modes, ScriptedInvoker, startHarness, until, WS, type Harness } from './harness.js';

jest.setTimeout(90_000);

const order: string[] = [];
const startedAt = new Map<string, number>();
const gates = new Gates();
const invoker = new ScriptedInvoker({
  busy: () => [{ run: 'work' }, { sleep: 'hold', ms: 150 }, { run: 'done' }],
  // Holds by sleeping (`ms`), or by executing its step until the test opens the gate named `gate`.
  tagged: (event) => [
    { run: 'start', fn: () => { order.push(event.data.tag as string); startedAt.set(event.data.tag as string, Date.now()); return event.data.tag; } },
    event.data.gate ? { work: 'hold', until: () => gates.wait(event.data.gate) } : { sleep: 'hold', ms: (event.data.ms as number) ?? 100 },
    { run: 'after' },
  ],
  long: () => [{ run: 'first' }, { sleep: 'forever', ms: 3_600_000 }],
  gated: (event) => [{ run: 'start' }, { work: 'hold', until: () => gates.wait(event.data.gate) }, { run: 'done' }],
  thinker: () => [{ run: 'start' }, { infer: 'ask', model: 'any' }, { sleep: 'nap', ms: 3000 }, { run: 'after' }],
  // A parent calling `kid` (its flow control registered, not sent: the scheduler evaluates it over the child's input).
  caller: (event) => [{ child: 'call', workflow: 'kid', data: event.data }, { run: 'done' }],
  kid: (event) => [{ run: 'start' }, { work: 'hold', until: () => gates.wait(event.data.gate) }],
  // A queued singleton that invokes itself on its own key.
  nested: (event) => (event.data.depth > 0 ? [{ child: 'inner', workflow: 'nested', data: { ...event.data, depth: event.data.depth - 1 } }] : [{ run: 'done' }]),
  doomed: (event, ctx) =>
    ctx.onFailure
      ? [{ run: 'cleanup' }]
      : [{ work: 'hold', until: () => gates.wait(event.data.gate) }, { run: 'boom', fn: () => { throw new Error('down'); }, retriable: false }],
});

describe.each(modes())('flow control in the scheduler (%s)', (mode) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(mode, invoker);
  });
  afterAll(async () => {
    gates.openAll();
    await h?.close();
  });

  const holders = async (key: string) =>
    (await h.db.query<{ n: number }>(
      `select count(*)::int as n from scheduler.runs where concurrency_key = $1 and admitted and status in ('queued', 'running', 'waiting', 'paused')`,
      [key],
    ))[0]!.n;

  it('never runs more than the concurrency limit of a key, and runs them all', async () => {
    const key = `k-${mode}`;
    const ids = await Promise.all(Array.from({ length: 30 }, () => h.start('busy', {}, { flow: { concurrencyLimit: 3, concurrencyKey: key } })));
    let max = 0;
    const watch = setInterval(() => void holders(key).then((n) => (max = Math.max(max, n))), 10);
    try {
      for (const id of ids) await h.waitFor(id, ['succeeded'], 60_000);
    } finally {
      clearInterval(watch);
    }
    expect(max).toBeGreaterThan(0);
    expect(max).toBeLessThanOrEqual(3);
    // Another key is not held back by this one.
    const other = await h.start('busy', {}, { flow: { concurrencyLimit: 1, concurrencyKey: `${key}-other` } });
    await h.waitFor(other, ['succeeded']);
  });

  it('two constraints: a run needs a slot of each key, holds both, and one blocked on its second key does not hold back the others', async () => {
    const all = `all-${mode}`;
    const two = (user: string, data: Record<string, unknown> = {}, workflow = 'busy') =>
      h.start(workflow, data, { flow: { concurrencyLimit: 4, concurrencyKey: all, concurrencyLimit2: 1, concurrencyKey2: `${user}-${mode}` } });
    const users = ['u0', 'u1', 'u2', 'u3', 'u4', 'u5'];
    const ids = [];
    for (const user of users) ids.push(await two(user), await two(user));
    const perUser = async () =>
      h.db.query<{ k: string; n: number }>(
        `select concurrency_key_2 as k, count(*)::int as n from scheduler.runs
          where concurrency_key = $1 and concurrency_limit_2 > 0 and admitted and status in ('queued', 'running', 'waiting', 'paused') group by 1`,
        [all],
      );
    let maxAll = 0;
    let maxUser = 0;
    const watch = setInterval(() => {
      void holders(all).then((n) => (maxAll = Math.max(maxAll, n)));
      void perUser().then((rows) => (maxUser = Math.max(maxUser, ...rows.map((r) => r.n), 0)));
    }, 10);
    try {
      for (const id of ids) await h.waitFor(id, ['succeeded'], 60_000);
    } finally {
      clearInterval(watch);
    }
    expect([maxAll > 1, maxAll <= 4, maxUser]).toEqual([true, true, 1]);

    // u9's first run holds u9's slot (executing a step); its second waits on that key (and says so) while u8's, started later, runs.
    const holder = await two('u9', { tag: 'holder', gate: `u9-${mode}` }, 'tagged');
    await h.waitFor(holder, ['running']);
    const blocked = await two('u9', { tag: 'blocked' }, 'tagged');
    // More of u9's runs queued than the admission looks ahead: they cost it one place, not its whole look-ahead.
    const flood = await Promise.all(Array.from({ length: 120 }, () => two('u9', { tag: 'flood' }, 'tagged')));
    const passing = await two('u8', { tag: 'passing' }, 'tagged');
    await h.waitFor(passing, ['succeeded'], 30_000);
    const read = (await h.call('runs.get', { params: { id: blocked } })).body;
    expect(read).toMatchObject({ status: 'queued', waitingFor: { kind: 'concurrency', key: `u9-${mode}`, limit: 1, holding: 1 } });
    const cancelFlood = await h.call('runs.bulkCancel', { body: { workflow: 'tagged', status: 'queued', if: "event.data.tag == 'flood'" } });
    expect(cancelFlood.body).toMatchObject({ matched: flood.length, cancelled: flood.length });
    await h.call('runs.cancel', { params: { id: holder } });
    gates.open(`u9-${mode}`);
    await h.waitFor(blocked, ['succeeded'], 30_000);
  });

  it('two replicas admitting at once never pass either constraint, a second key shared by runs of several first keys included', async () => {
    const r2 = await h.replica();
    try {
      // Per tenant at most 2, per user at most 1; a user's runs span the tenants, so two admissions of
      // different tenants (on either replica) contend for the same user's slot.
      const tenants = ['t0', 't1', 't2'].map((t) => `${t}-${mode}`);
      const users = ['a', 'b', 'c'].map((u) => `${u}-${mode}`);
      const ids = await Promise.all(
        Array.from({ length: 36 }, (_, i) =>
          h.start('busy', {}, { flow: { concurrencyLimit: 2, concurrencyKey: tenants[i % 3]!, concurrencyLimit2: 1, concurrencyKey2: users[Math.floor(i / 3) % 3]! } }),
        ),
      );
      const count = async (col: string, keys: string[]) =>
        (await h.db.query<{ n: number }>(
          `select count(*)::int as n from scheduler.runs where ${col} = any($1::text[]) and admitted and status in ('queued', 'running', 'waiting', 'paused') group by ${col}`,
          [keys],
        )).map((r) => r.n);
      let maxTenant = 0;
      let maxUser = 0;
      const watch = setInterval(() => {
        void count('concurrency_key', tenants).then((ns) => (maxTenant = Math.max(maxTenant, ...ns, 0)));
        void count('concurrency_key_2', users).then((ns) => (maxUser = Math.max(maxUser, ...ns, 0)));
      }, 5);
      try {
        for (const id of ids) await h.waitFor(id, ['succeeded'], 60_000);
      } finally {
        clearInterval(watch);
      }
      expect([maxTenant <= 2, maxUser]).toEqual([true, 1]);
    } finally {
      await r2.handle.stop();
    }
  });

  it("a shared key (scope env): two workflows' runs hold its slots together, never more than its limit", async () => {
    const shared = { concurrencyLimit: 2_147_483_647, concurrencyKey: '', concurrencyLimit2: 2, concurrencyKey2: `openai-${mode}`, concurrencyShared2: true };
    const ids = [];
    for (let i = 0; i < 8; i++) ids.push(await h.start('busy', {}, { flow: shared }), await h.start('tagged', { tag: 'shared', ms: 100 }, { flow: shared }));
    const byWorkflow = async () =>
      h.db.query<{ workflow: string; n: number }>(
        `select workflow, count(*)::int as n from scheduler.runs
          where concurrency_key_2 = $1 and concurrency_shared_2 and admitted and status in ('queued', 'running', 'waiting', 'paused') group by 1`,
        [shared.concurrencyKey2],
      );
    let maxShared = 0;
    const holders = new Set<string>();
    const watch = setInterval(() => {
      void byWorkflow().then((rows) => {
        maxShared = Math.max(maxShared, rows.reduce((t, r) => t + r.n, 0));
        for (const r of rows) holders.add(r.workflow);
      });
    }, 5);
    try {
      for (const id of ids) await h.waitFor(id, ['succeeded'], 60_000);
    } finally {
      clearInterval(watch);
    }
    // Each workflow's own runs would fill two slots each (4 at once): the slots are the two workflows' together.
    expect([maxShared, [...holders].sort()]).toEqual([2, ['busy', 'tagged']]);
  });

  it('a run gives its slot back while parked (a sleep) or paused, and waits for one again once due', async () => {
    const key = `park-${mode}`;
    const flow = { concurrencyLimit: 1, concurrencyKey: key };
    const read = async (id: string) => (await h.call('runs.get', { params: { id } })).body;
    // The napper sleeps: the next run of the key (slots are per workflow and key) is admitted and executes meanwhile.
    const napper = await h.start('tagged', { tag: 'napper', ms: 2000 }, { flow });
    await h.waitFor(napper, ['waiting']);
    const holder = await h.start('tagged', { tag: 'holder', gate: `${key}-1` }, { flow });
    await h.waitFor(holder, ['running']);
    expect(await holders(key)).toBe(1);
    // Its nap over, the napper does not go on while the holder executes: it waits for the slot, and says so.
    await until(async () => (await read(napper)).waitingFor?.kind === 'concurrency', 15_000, 'the napper waits for the slot');
    expect((await read(napper)).waitingFor).toEqual({ kind: 'concurrency', key, limit: 1, holding: 1 });
    expect([(await read(napper)).status, invoker.count(napper, 'after')]).toEqual(['waiting', 0]);
    gates.open(`${key}-1`);
    await h.waitFor(holder, ['succeeded'], 30_000);
    await h.waitFor(napper, ['succeeded'], 30_000);
    expect(invoker.count(napper, 'after')).toBe(1);

    // Paused at a step boundary, a run gives its slot back; resumed, it waits for one.
    const paused = await h.start('gated', { gate: `${key}-2` }, { flow });
    await h.waitFor(paused, ['running']);
    await h.call('runs.pause', { params: { id: paused } });
    gates.open(`${key}-2`);
    await h.waitFor(paused, ['paused']);
    const next = await h.start('gated', { gate: `${key}-3` }, { flow });
    await h.waitFor(next, ['running']);
    await h.call('runs.resume', { params: { id: paused } });
    await until(async () => (await read(paused)).waitingFor?.kind === 'concurrency', 15_000, 'the resumed run waits for the slot');
    expect(invoker.count(paused, 'done')).toBe(0);
    gates.open(`${key}-3`);
    await h.waitFor(next, ['succeeded'], 30_000);
    await h.waitFor(paused, ['succeeded'], 30_000);
    expect(invoker.count(paused, 'done')).toBe(1);
  });

  it('a run keeps its slot while the service makes its model call (an infer step), and gives it back when it sleeps', async () => {
    const key = `think-${mode}`;
    const flow = { concurrencyLimit: 1, concurrencyKey: key };
    const handed: { runId: string; stepId: string }[] = [];
    await h.bus.ensureStream(streams.invokerCmds);
    const sub = await h.bus.consume(
      { stream: streams.invokerCmds.name, durable: `think-${mode}-${Date.now()}`, filterSubject: subjects.requestInference },
      async (m) => void handed.push(fromBinary(StepHandoffSchema, m.data)),
    );
    try {
      const thinker = await h.start('thinker', {}, { flow });
      await until(() => handed.some((x) => x.runId === thinker), 10_000, 'the Infer hand-off');
      await h.waitFor(thinker, ['waiting']);
      // The model call is out: the next run of the key waits for the slot (admission looks every 250 ms).
      const next = await h.start('thinker', {}, { flow });
      await new Promise((r) => setTimeout(r, 1500));
      const read = async (id: string) => (await h.call('runs.get', { params: { id } })).body;
      expect([(await read(next)).status, (await read(next)).waitingFor, invoker.count(next, 'start')]).toEqual([
        'queued',
        { kind: 'concurrency', key, limit: 1, holding: 1 },
        0,
      ]);
      expect((await read(thinker)).waitingFor).toEqual({ kind: 'model', step: 'ask' });
      // The answer comes; the thinker goes on to its nap, which gives the slot to the next run.
      const stepId = handed.find((x) => x.runId === thinker)!.stepId;
      await h.bus.publish(
        subjects.resolveStep,
        toBinary(ResolveStepSchema, create(ResolveStepSchema, { workspaceId: WS, runId: thinker, stepId, data: new TextEncoder().encode('{"text":"hi"}') })),
      );
      await until(() => invoker.count(next, 'start') === 1, 15_000, 'the next run starts once the thinker naps');
      expect(invoker.count(thinker, 'after')).toBe(0);
    } finally {
      await sub.stop();
    }
  });

  it("a replay takes its source's concurrency: it waits for a slot while the key is full", async () => {
    const key = `replay-${mode}`;
    const flow = { concurrencyLimit: 1, concurrencyKey: key };
    const read = async (id: string) => (await h.call('runs.get', { params: { id } })).body;
    const first = await h.start('gated', { gate: `${key}-1` }, { flow });
    gates.open(`${key}-1`);
    await h.waitFor(first, ['succeeded'], 30_000);
    // Another run of the key holds its one slot; the replay of the first waits for it, and says so.
    const holder = await h.start('gated', { gate: `${key}-2` }, { flow });
    await h.waitFor(holder, ['running']);
    const replay = (await h.call('runs.replay', { params: { id: first } })).body.id as string;
    await until(async () => (await read(replay)).waitingFor?.kind === 'concurrency', 15_000, 'the replay to wait for the slot');
    await new Promise((r) => setTimeout(r, 500));
    expect([(await read(replay)).status, (await read(replay)).waitingFor, invoker.count(replay, 'start')]).toEqual([
      'queued',
      { kind: 'concurrency', key, limit: 1, holding: 1 },
      0,
    ]);
    gates.open(`${key}-2`);
    await h.waitFor(holder, ['succeeded'], 30_000);
    await h.waitFor(replay, ['succeeded'], 30_000);
  });

  it("a child takes its workflow's concurrency, its key evaluated over the child's input", async () => {
    await h.register('app', [{ name: 'kid', concurrency: { limit: 1, key: 'event.data.user' } }, { name: 'caller' }]);
    const [ada, bob] = [`ada-${mode}`, `bob-${mode}`];
    const parents = await Promise.all([1, 2, 3].map((i) => h.start('caller', { user: ada, gate: `${ada}-${i}` })));
    const kids = async (parentIds: string[]) =>
      (await h.db.query<{ id: string }>('select id from scheduler.runs where parent_run_id = any($1::text[]) order by created_at, id', [parentIds])).map((r) => r.id);
    await until(async () => (await kids(parents)).length === 3, 15_000, "ada's three children");
    await until(async () => (await kids(parents)).some((k) => invoker.count(k, 'start') === 1), 15_000, "one of ada's children to start");
    // Another user's child is not held back by ada's.
    const other = await h.start('caller', { user: bob, gate: `${bob}-1` });
    await until(async () => (await kids([other])).length === 1 && invoker.count((await kids([other]))[0]!, 'start') === 1, 15_000, "bob's child to start");
    await new Promise((r) => setTimeout(r, 1000));
    const adas = await kids(parents);
    expect(adas.map((k) => invoker.count(k, 'start')).sort()).toEqual([0, 0, 1]);
    const waiting = adas.find((k) => invoker.count(k, 'start') === 0)!;
    expect((await h.call('runs.get', { params: { id: waiting } })).body.waitingFor).toEqual({ kind: 'concurrency', key: ada, limit: 1, holding: 1 });
    for (const i of [1, 2, 3]) gates.open(`${ada}-${i}`);
    gates.open(`${bob}-1`);
    for (const id of [...parents, other]) await h.waitFor(id, ['succeeded'], 30_000);
  });

  it('a queued singleton invoking its own workflow on the key it holds runs the child within its hold', async () => {
    const key = `nest-${mode}`;
    await h.register('app', [{ name: 'nested', singleton: { key: 'event.data.user', mode: 'queue' } }]);
    const flow = { concurrencyLimit: 1, concurrencyKey: key, singletonMode: 'queue', singletonKey: key };
    const parent = await h.start('nested', { user: key, depth: 1 }, { flow });
    await h.waitFor(parent, ['succeeded'], 30_000);
    // Another user's child queues on its own key like any run.
    const other = await h.start('nested', { user: `${key}-other`, depth: 1 }, { flow: { ...flow, concurrencyKey: `${key}-x`, singletonKey: `${key}-x` } });
    await h.waitFor(other, ['succeeded'], 30_000);
    const [child] = await h.db.query<{ concurrency_key: string; holds_slots: boolean }>('select concurrency_key, holds_slots from scheduler.runs where parent_run_id = $1', [other]);
    expect(child).toEqual({ concurrency_key: `${key}-other`, holds_slots: true });
  });

  it("an onFailure run takes the failed run's concurrency: it waits for a slot while the key is full", async () => {
    const key = `fail-${mode}`;
    await h.register('app', [{ name: 'doomed', onFailure: true }]);
    const flow = { concurrencyLimit: 1, concurrencyKey: key };
    const first = await h.start('doomed', { gate: `${key}-1` }, { flow });
    await h.waitFor(first, ['running']);
    // Queued before the failure: it takes the slot the failed run gives back, and the onFailure run waits behind it.
    const second = await h.start('doomed', { gate: `${key}-2` }, { flow });
    await h.waitFor(second, ['queued']);
    gates.open(`${key}-1`);
    await h.waitFor(first, ['failed'], 30_000);
    const handlerOf = async (id: string) => (await h.db.query<{ id: string }>('select id from scheduler.runs where on_failure_of = $1', [id]))[0]?.id;
    await until(async () => (await handlerOf(first)) !== undefined, 15_000, 'the onFailure run');
    const handler = (await handlerOf(first))!;
    await h.waitFor(second, ['running'], 15_000);
    await new Promise((r) => setTimeout(r, 500));
    expect([(await h.call('runs.get', { params: { id: handler } })).body.waitingFor, invoker.count(handler, 'cleanup')]).toEqual([
      { kind: 'concurrency', key, limit: 1, holding: 1 },
      0,
    ]);
    gates.open(`${key}-2`);
    await h.waitFor(handler, ['succeeded'], 30_000);
    await until(async () => (await handlerOf(second)) !== undefined, 15_000, "the second run's onFailure run");
    await h.waitFor((await handlerOf(second))!, ['succeeded'], 30_000);
    expect(invoker.count(handler, 'cleanup')).toBe(1);
  });

  it('a key with room is admitted however many full keys have older waiting runs', async () => {
    // 120 keys each held by a run no replica drives (a lease an hour out) with a run queued behind it,
    // all older than the new key's run: more full keys than admission looks at in a round.
    const app = `fair-${mode}`;
    await h.db.query(
      `insert into scheduler.runs (id, workspace_id, workflow, app, status, trigger_kind, input, concurrency_key, concurrency_limit, admitted,
                                   lease_owner, lease_until, created_at)
       select 'run_fair_' || $2 || '_' || g || '_' || held, $1, 'busy', $2, case when held then 'running' else 'queued' end, 'event', '{}',
              'k' || g, 1, held, case when held then 'ghost' end, case when held then now() + interval '1 hour' end,
              now() - interval '1 minute' + g * interval '1 ms'
         from generate_series(1, 120) g, (values (true), (false)) v(held)`,
      [WS, app],
    );
    try {
      const fresh = await h.start('busy', {}, { app, flow: { concurrencyLimit: 1, concurrencyKey: 'fresh' } });
      await h.waitFor(fresh, ['succeeded'], 15_000);
      const admitted = await h.db.query(`select count(*)::int as n from scheduler.runs where app = $1 and status = 'queued' and admitted`, [app]);
      expect(admitted[0]!.n).toBe(0);
    } finally {
      await h.db.query(`delete from scheduler.runs where app = $1`, [app]);
    }
  });

  /**
   * `users` second keys ('user-<g>'), each with its one slot held by a run no replica drives and `queued` runs waiting,
   * all older than another user's run (first key 'all' of limit `limit`), which is then started and must succeed; then `check`.
   */
  const behindFullSecondKeys = async (app: string, users: number, queued: number, limit: number, check: () => Promise<void>) => {
    await h.db.query(
      `insert into scheduler.runs (id, workspace_id, workflow, app, status, trigger_kind, input, concurrency_key, concurrency_limit, admitted,
                                   concurrency_key_2, concurrency_limit_2, lease_owner, lease_until, created_at)
       select 'run_full_' || $2 || '_' || g || '_' || q, $1, 'busy', $2, case when q = 0 then 'running' else 'queued' end, 'event', '{}', 'all', $5, q = 0,
              'user-' || g, 1, case when q = 0 then 'ghost' end, case when q = 0 then now() + interval '1 hour' end,
              now() - interval '1 minute' + (g * ($4 + 1) + q) * interval '1 ms'
         from generate_series(0, $3 - 1) g, generate_series(0, $4) q`,
      [WS, app, users, queued, limit],
    );
    try {
      const other = await h.start('busy', {}, { app, flow: { concurrencyLimit: limit, concurrencyKey: 'all', concurrencyLimit2: 1, concurrencyKey2: 'other' } });
      await h.waitFor(other, ['succeeded'], 15_000);
      await check();
    } finally {
      await h.db.query(`delete from scheduler.runs where app = $1`, [app]);
    }
  };

  it("a run whose second key has room is admitted behind a flood of a full second key's runs", async () => {
    // One user's 150 runs queued first (more than admission reads in line at once); the first key has room for one more.
    const app = `flood-${mode}`;
    await behindFullSecondKeys(app, 1, 150, 2, async () => {
      const flood = await h.db.query(`select count(*)::int as n from scheduler.runs where app = $1 and concurrency_key_2 = 'user-0' and admitted`, [app]);
      expect(flood[0]!.n).toBe(1);
    });
  });

  it("a run whose second key has room is admitted behind runs of more full second keys than admission reads at once", async () => {
    // 250 users each with a run queued behind its held slot.
    const app = `fulls-${mode}`;
    await behindFullSecondKeys(app, 250, 1, 252, async () => {
      const passed = await h.db.query(`select count(*)::int as n from scheduler.runs where app = $1 and status = 'queued' and admitted`, [app]);
      expect(passed[0]!.n).toBe(0);
    });
  });

  it('starts queued runs of a key by priority, then in creation order', async () => {
    const key = `prio-${mode}`;
    // Slots are per workflow and key: the blocker is a run of the same workflow.
    const blocker = await h.start('tagged', { tag: 'blocker', gate: key }, { flow: { concurrencyLimit: 1, concurrencyKey: key } });
    await h.waitFor(blocker, ['running']);
    order.length = 0;

    const low = await h.start('tagged', { tag: 'low' }, { flow: { concurrencyLimit: 1, concurrencyKey: key, priority: BigInt(1) } });
    const high = await h.start('tagged', { tag: 'high' }, { flow: { concurrencyLimit: 1, concurrencyKey: key, priority: BigInt(10) } });
    const mid = await h.start('tagged', { tag: 'mid' }, { flow: { concurrencyLimit: 1, concurrencyKey: key, priority: BigInt(5) } });
    await new Promise((r) => setTimeout(r, 300)); // deliberately: time for a start that must not happen while the slot is held
    expect(order).toEqual([]);
    await h.call('runs.cancel', { params: { id: blocker } });
    gates.open(key);
    for (const id of [low, high, mid]) await h.waitFor(id, ['succeeded'], 30_000);
    expect(order).toEqual(['high', 'mid', 'low']);
  });

  it('throttle: a run does not start before its not-before time, a concurrency slot free or not', async () => {
    const t0 = Date.now();
    const id = await h.start('tagged', { tag: 'later' }, { flow: { notBeforeMs: BigInt(t0 + 700) } });
    const limited = await h.start('tagged', { tag: 'later' }, { flow: { notBeforeMs: BigInt(t0 + 700), concurrencyLimit: 5, concurrencyKey: `throttled-${mode}` } });
    for (const run of [id, limited]) {
      await h.waitFor(run, ['succeeded'], 20_000);
      // Its first step was stored once its pass ran: not before the throttle time.
      const steps = (await h.call('runs.steps', { params: { id: run } })).body as { name: string; startedAt: string }[];
      expect(Date.parse(steps.find((st) => st.name === 'start')!.startedAt) - t0).toBeGreaterThanOrEqual(700);
    }
  });

  it('singleton skip drops the new run while one is active; cancel replaces the active one; each shows live', async () => {
    const key = `s-${mode}`;
    const dec = new TextDecoder();
    const live: { runId: string; status: string }[] = [];
    const sub = h.bus.subscribe(subjects.workspaceRuns(WS), (data) => live.push(JSON.parse(dec.decode(data))));
    const heard = (runId: string, status: string) => until(() => live.some((f) => f.runId === runId && f.status === status), 2000, `${runId} ${status} on the workspace stream`);
    const first = await h.start('long', {}, { flow: { singletonMode: 'skip', singletonKey: key } });
    await h.waitFor(first, ['waiting']);
    expect((await h.call('runs.activeForKey', { body: { app: 'app', workflow: 'long', key, runIds: [first] } })).body).toEqual({ active: [first], finished: [] });
    const skipped = await h.start('long', {}, { flow: { singletonMode: 'skip', singletonKey: key } });
    const s = await h.waitFor(skipped, ['cancelled']);
    expect(s.error.message).toMatch(/Skipped/);
    const replacing = await h.start('long', {}, { flow: { singletonMode: 'cancel', singletonKey: key } });
    await h.waitFor(first, ['cancelled']);
    await h.waitFor(replacing, ['waiting']);
    expect((await h.call('runs.activeForKey', { body: { app: 'app', workflow: 'long', key, runIds: [first] } })).body).toEqual({ active: [replacing], finished: [first] });
    // Stored without a pass of the engine, these frames go live all the same: the skipped run, queued then
    // cancelled; the run it replaced, cancelled; the replacing one, queued.
    await heard(skipped, 'cancelled');
    await heard(first, 'cancelled');
    await heard(replacing, 'queued');
    await sub.stop();
    await h.call('runs.cancel', { params: { id: replacing } });
  });

  it('a replay is a run of its singleton key: skip refuses it while another is active, cancel replaces the active one, and later runs\' gates see it', async () => {
    const key = `r-${mode}`;
    const active = async (app: string) => (await h.call('runs.activeForKey', { body: { app, workflow: 'long', key, runIds: [] } })).body.active;
    const skipApp = `solo-skip-${mode}`;
    await h.register(skipApp, [{ name: 'long', singleton: { key: 'event.data.user' } }]);
    const skip = { app: skipApp, flow: { singletonMode: 'skip', singletonKey: key } };
    const first = await h.start('long', { user: key }, skip);
    await h.waitFor(first, ['waiting']);
    await h.call('runs.cancel', { params: { id: first } });
    const second = await h.start('long', { user: key }, skip);
    await h.waitFor(second, ['waiting']);
    await expect(h.call('runs.replay', { params: { id: first } })).rejects.toMatchObject({ status: 409, code: 'singleton_active' });
    expect((await h.call('runs.bulkReplay', { body: { app: skipApp, status: 'cancelled' } })).body).toMatchObject({ matched: 1, replayed: 0, skipped: 1, failed: 0 });
    await h.call('runs.cancel', { params: { id: second } });
    const replay = (await h.call('runs.replay', { params: { id: first } })).body.id as string;
    await h.waitFor(replay, ['waiting']);
    expect(await active(skipApp)).toEqual([replay]);
    const skipped = await h.start('long', { user: key }, skip);
    expect((await h.waitFor(skipped, ['cancelled'])).error.message).toMatch(/Skipped/);
    await h.call('runs.cancel', { params: { id: replay } });

    const cancelApp = `solo-cancel-${mode}`;
    await h.register(cancelApp, [{ name: 'long', singleton: { key: 'event.data.user', mode: 'cancel' } }]);
    const cancel = { app: cancelApp, flow: { singletonMode: 'cancel', singletonKey: key } };
    const old = await h.start('long', { user: key }, cancel);
    await h.waitFor(old, ['waiting']);
    await h.call('runs.cancel', { params: { id: old } });
    const current = await h.start('long', { user: key }, cancel);
    await h.waitFor(current, ['waiting']);
    const replacing = (await h.call('runs.replay', { params: { id: old } })).body.id as string;
    expect((await h.waitFor(current, ['cancelled'])).error.message).toMatch(/replay of this singleton key/);
    await h.waitFor(replacing, ['waiting']);
    expect(await active(cancelApp)).toEqual([replacing]);
    const newer = await h.start('long', { user: key }, cancel);
    await h.waitFor(replacing, ['cancelled']);
    await h.waitFor(newer, ['waiting']);
    await h.call('runs.cancel', { params: { id: newer } });
  });

  it('singleton queue: one active run per key from start to end, sleeps and pauses included; the next starts when it ends', async () => {
    const key = `q-${mode}`;
    const flow = { concurrencyLimit: 1, concurrencyKey: key, singletonMode: 'queue', singletonKey: key };
    const read = async (id: string) => (await h.call('runs.get', { params: { id } })).body;
    const tag = (t: string) => `${key}-${t}`;
    const a = await h.start('tagged', { tag: tag('a'), ms: 1500 }, { flow });
    await h.waitFor(a, ['waiting']);
    await until(async () => (await read(a)).waitingFor?.kind === 'sleep', 15_000, 'the first run to sleep');
    const b = await h.start('tagged', { tag: tag('b'), ms: 1500 }, { flow });
    const c = await h.start('tagged', { tag: tag('c'), ms: 10 }, { flow });
    await h.waitFor(b, ['queued']);
    // The first sleeps and keeps its slot: the next waits for it, and says so.
    await until(async () => (await read(b)).waitingFor?.kind === 'singleton', 15_000, 'the second run to wait for the key');
    await new Promise((r) => setTimeout(r, 500));
    expect([(await read(b)).status, (await read(b)).waitingFor, invoker.count(b, 'start')]).toEqual(['queued', { kind: 'singleton', key, activeRunId: a }, 0]);
    await h.waitFor(a, ['succeeded'], 30_000);
    // Paused while it sleeps, the second still holds the key: the third does not start.
    await until(async () => (await read(b)).waitingFor?.kind === 'sleep', 15_000, 'the second run to sleep');
    await h.call('runs.pause', { params: { id: b } });
    await h.waitFor(b, ['paused']);
    await new Promise((r) => setTimeout(r, 2000));
    expect([(await read(c)).status, invoker.count(c, 'start')]).toEqual(['queued', 0]);
    await h.call('runs.resume', { params: { id: b } });
    await h.waitFor(b, ['succeeded'], 30_000);
    await h.waitFor(c, ['succeeded'], 30_000);
    expect(order.filter((t) => t.startsWith(key))).toEqual([tag('a'), tag('b'), tag('c')]);
    const ends = await h.db.query<{ id: string; ended: number }>(
      'select id, (extract(epoch from ended_at) * 1000)::float8 as ended from scheduler.runs where id = any($1::text[])',
      [[a, b, c]],
    );
    const at = new Map(ends.map((r) => [r.id, r]));
    // Each started its steps only once the one before it had ended.
    expect([startedAt.get(tag('b'))! >= at.get(a)!.ended, startedAt.get(tag('c'))! >= at.get(b)!.ended]).toEqual([true, true]);
  });

  // Last: it stops this harness's scheduler. Real Postgres only: PGlite runs one transaction at a time.
  if (mode === 'real') {
    it("two admissions at once admit one run of a second key they share, not one each: two first keys, or two workflows' shared key", async () => {
      await h.stopScheduler();
      for (let round = 0; round < 10; round++) {
        const user = `race-${round}`;
        const seeded: string[] = [];
        for (const tenant of ['t0', 't1']) {
          const id = `run_race_${round}_${tenant}`;
          seeded.push(id);
          await h.db.query(
            `insert into scheduler.runs (id, workspace_id, workflow, app, status, trigger_kind, input, concurrency_key, concurrency_limit, admitted, concurrency_key_2, concurrency_limit_2)
             values ($1, $2, 'busy', 'race', 'queued', 'event', '{}', $3, 1, false, $4, 1)`,
            [id, WS, `${tenant}-${round}`, user],
          );
        }
        // Two replicas each on one of the first keys, at once: both want the user's one slot.
        const key = (tenant: string) => ({ workspace_id: WS, app: 'race', workflow: 'busy', concurrency_key: `${tenant}-${round}`, concurrency_limit: 1, second: true });
        await Promise.all([admitKey(h.db, key('t0')), admitKey(h.db, key('t1'))]);
        const admitted = await h.db.query('select id from scheduler.runs where id = any($1::text[]) and admitted', [seeded]);
        expect({ round, admitted: admitted.length }).toEqual({ round, admitted: 1 });
      }
      // A shared (env) key: two workflows' admissions at once take its one slot once.
      for (let round = 0; round < 10; round++) {
        const seeded: string[] = [];
        for (const workflow of ['busy', 'tagged']) {
          const id = `run_shared_${round}_${workflow}`;
          seeded.push(id);
          await h.db.query(
            `insert into scheduler.runs (id, workspace_id, workflow, app, status, trigger_kind, input, concurrency_key, concurrency_limit, admitted,
                                         concurrency_key_2, concurrency_limit_2, concurrency_shared_2)
             values ($1, $2, $3, 'race', 'queued', 'event', '{}', '', 2147483647, false, $4, 1, true)`,
            [id, WS, workflow, `shared-race-${round}`],
          );
        }
        const key = (workflow: string) => ({ workspace_id: WS, app: 'race', workflow, concurrency_key: '', concurrency_limit: 2_147_483_647, second: true });
        await Promise.all([admitKey(h.db, key('busy')), admitKey(h.db, key('tagged'))]);
        const admitted = await h.db.query('select id from scheduler.runs where id = any($1::text[]) and admitted', [seeded]);
        expect({ round, shared: admitted.length }).toEqual({ round, shared: 1 });
      }
    });
  }
});
