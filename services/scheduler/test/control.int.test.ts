import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { fromBinary, RunFinishedSchema } from '@dws/proto';
import { streams, subjects } from '@dws/runtime';
import { activeForBulk } from '../src/store/control.js';
import { modes, ScriptedInvoker, startHarness, until, WS, type Harness } from './harness.js';

jest.setTimeout(60_000);

let gate: Promise<void> | undefined;
const invoker = new ScriptedInvoker({
  three: () => [{ run: 'a' }, { run: 'b' }, { run: 'c' }],
  sleeper: () => [{ run: 'first' }, { sleep: 'nap', ms: 3_600_000 }, { run: 'never' }],
  fails: (event) => [{ run: 'a' }, { run: 'b', fn: () => { if (!event.data.fixed) throw new Error('b broke'); return 'fixed'; } }, { run: 'c' }],
  slow: () => Array.from({ length: 6 }, (_, i) => ({ run: `s${i}` })),
  nest: () => [{ child: 'kid', workflow: 'nestMiddle' }],
  nestMiddle: () => [{ child: 'kid', workflow: 'sleeper' }],
});

describe.each(modes())('run control (%s)', (mode) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(mode, invoker);
  });
  afterAll(async () => h?.close());
  const expectError = async (p: Promise<unknown>, status: number, code: string) => {
    await expect(p).rejects.toMatchObject({ status, code });
  };

  it('cancels a waiting run, then refuses pause and cancel with 409', async () => {
    const id = await h.start('sleeper');
    await h.waitFor(id, ['waiting']);
    const res = await h.call('runs.cancel', { params: { id } });
    expect(res.body.status).toBe('cancelled');
    await expectError(h.call('runs.cancel', { params: { id } }), 409, 'run_terminal');
    await expectError(h.call('runs.pause', { params: { id } }), 409, 'run_terminal');
    await expectError(h.call('runs.cancel', { params: { id: 'run_missing' } }), 404, 'run_not_found');
    const frames = await h.db.query<{ payload: any }>(`select payload from scheduler.frames where run_id = $1 and kind = 'run_status' order by seq`, [id]);
    expect(frames.at(-1)!.payload.status).toBe('cancelled');
  });

  it('a control action\'s frame goes live at once: the run\'s stream and the workspace\'s hear pause, resume and cancel', async () => {
    const id = await h.start('sleeper');
    await h.waitFor(id, ['waiting']);
    const dec = new TextDecoder();
    const timeline: { seq: number; status: string }[] = [];
    const workspace: { runId: string; status: string }[] = [];
    const subs = [
      h.bus.subscribe(subjects.runTimeline(WS, id), (data) => timeline.push(JSON.parse(dec.decode(data)))),
      h.bus.subscribe(subjects.workspaceRuns(WS), (data) => workspace.push(JSON.parse(dec.decode(data)))),
    ];
    try {
      // The action's own frame, not the run's last: resumed, the run may already have parked again.
      const lastSeq = async () => (await h.db.query<{ seq: number }>(`select max(seq) as seq from scheduler.frames where run_id = $1`, [id]))[0]!.seq;
      const stored = async (status: string, after: number) => (await h.db.query<{ seq: number }>(
        `select seq from scheduler.frames where run_id = $1 and seq > $2 and kind = 'run_status' and payload->>'status' = $3 order by seq limit 1`, [id, after, status]))[0];
      for (const [action, status] of [['runs.pause', 'paused'], ['runs.resume', 'queued'], ['runs.cancel', 'cancelled']] as const) {
        if (action === 'runs.cancel') await h.waitFor(id, ['waiting']); // resumed, it parks on its sleep again
        const before = await lastSeq();
        await h.call(action, { params: { id } });
        const last = await stored(status, before);
        expect(last).toBeDefined();
        // Well within the run stream's 5 s resync, which is all that told a stream of it before.
        await until(() => timeline.some((f) => f.seq === last!.seq && f.status === status), 1000, `the live ${status} frame`);
        await until(() => workspace.some((f) => f.runId === id && f.status === status), 1000, `the workspace's ${status}`);
      }
    } finally {
      for (const sub of subs) await sub.stop();
    }
  });

  it('cancelling a parent cancels its child and grandchild: each stores and publishes its frames and its run end', async () => {
    const dec = new TextDecoder();
    const workspace: { runId: string; status: string }[] = [];
    const finished: { runId: string; status: string }[] = [];
    await h.bus.ensureStream(streams.schedulerFacts);
    const subs = [
      h.bus.subscribe(subjects.workspaceRuns(WS), (data) => workspace.push(JSON.parse(dec.decode(data)))),
      await h.bus.consume({ stream: streams.schedulerFacts.name, durable: `nest${Date.now()}`, filterSubject: subjects.runFinished }, async (m) => {
        const f = fromBinary(RunFinishedSchema, m.data);
        finished.push({ runId: f.runId, status: f.status });
      }),
    ];
    try {
      const id = await h.start('nest');
      const childOf = async (parent: string) => {
        let child: string | undefined;
        await until(async () => (child = (await h.db.query<{ id: string }>('select id from scheduler.runs where parent_run_id = $1', [parent]))[0]?.id) !== undefined, 10_000, `a child of ${parent}`);
        return child!;
      };
      const middle = await childOf(id);
      const leaf = await childOf(middle);
      await h.waitFor(leaf, ['waiting']);
      // A child's queued frame goes live as it is stored (it used to reach no stream).
      await until(() => [middle, leaf].every((r) => workspace.some((f) => f.runId === r && f.status === 'queued')), 2000, "the children's queued frames");
      await h.call('runs.cancel', { params: { id } });
      for (const r of [middle, leaf]) {
        const run = await h.waitFor(r, ['cancelled'], 2000);
        expect(run.error).toEqual({ message: 'Parent run ended.' });
        const frames = await h.db.query<{ seq: number; payload: any }>('select seq, payload from scheduler.frames where run_id = $1 order by seq', [r]);
        expect(frames.map((f) => f.seq)).toEqual(frames.map((_, i) => i + 1));
        expect(frames.at(-1)!.payload.status).toBe('cancelled');
        await until(() => workspace.some((f) => f.runId === r && f.status === 'cancelled'), 2000, `the live cancel of ${r}`);
      }
      await until(() => [id, middle, leaf].every((r) => finished.some((f) => f.runId === r && f.status === 'cancelled')), 15_000, 'a run end for each');
      // The grandchild's waiter went with it.
      expect(await h.db.query('select 1 from scheduler.waiters where run_id = $1', [leaf])).toHaveLength(0);
    } finally {
      for (const sub of subs) await sub.stop();
    }
  });

  it('pauses at a step boundary (idempotently), resumes, and answers 409 to resuming a run that is not paused', async () => {
    let release!: () => void;
    gate = new Promise<void>((r) => (release = r));
    invoker.hold = async (_runId, body) => {
      if (body.ctx.workflow === 'slow' && gate) await gate;
    };
    const id = await h.start('slow');
    await until(() => invoker.bodies.some((b) => b.ctx.runId === id), 10_000, 'the first pass to be in flight');
    await h.call('runs.pause', { params: { id } });
    await h.call('runs.pause', { params: { id } });
    gate = undefined;
    release();
    invoker.hold = undefined;
    const paused = await h.waitFor(id, ['paused']);
    expect(paused.status).toBe('paused');
    const done = (await h.call('runs.steps', { params: { id } })).body.length;
    expect(done).toBeLessThan(6);
    await new Promise((r) => setTimeout(r, 300)); // deliberately: time for a step that must not happen
    expect((await h.call('runs.steps', { params: { id } })).body.length).toBe(done); // the scheduler does not step a paused run
    expect((await h.call('runs.resume', { params: { id } })).body.status).toBe('queued');
    await h.waitFor(id, ['succeeded']);
    await expectError(h.call('runs.resume', { params: { id } }), 409, 'run_not_paused');
  });

  it('replays a finished run (with an input override) and refuses an unfinished one', async () => {
    const src = await h.start('three', { v: 1 });
    await h.waitFor(src, ['succeeded']);
    const r1 = await h.call('runs.replay', { params: { id: src }, body: { input: { v: 2 } } });
    expect(r1.body).toMatchObject({ status: 'queued', replayOf: src, workflow: 'three' });
    const replay = await h.waitFor(r1.body.id, ['succeeded']);
    expect(replay.input).toEqual({ v: 2 });
    const r2 = await h.call('runs.replay', { params: { id: src } });
    expect((await h.waitFor(r2.body.id, ['succeeded'])).input).toEqual({ v: 1 });
    const live = await h.start('sleeper');
    await h.waitFor(live, ['waiting']);
    await expectError(h.call('runs.replay', { params: { id: live } }), 409, 'run_not_finished');
    await h.call('runs.cancel', { params: { id: live } });
  });

  it('replays once per Idempotency-Key: a repeat, even concurrent, gets the first run; the key with another call is 422; an expired key is free', async () => {
    const src = await h.start('three', { v: 1 });
    await h.waitFor(src, ['succeeded']);
    const other = await h.start('three', { v: 9 });
    await h.waitFor(other, ['succeeded']);
    const key = `k-${src}`;
    const replay = (id: string, body?: unknown, k = key) => h.call('runs.replay', { params: { id }, body, headers: { 'idempotency-key': k } });
    const replaysOf = async (id: string) => (await h.db.query<{ id: string }>('select id from scheduler.runs where replay_of = $1', [id])).map((r) => r.id);

    const [a, b, c] = await Promise.all([replay(src, { input: { v: 2 } }), replay(src, { input: { v: 2 } }), replay(src, { input: { v: 2 } })]);
    expect(a.status).toBe(201);
    expect(new Set([a.body.id, b.body.id, c.body.id]).size).toBe(1);
    expect([a, b, c].filter((r) => r.headers['idempotent-replayed'] === 'true')).toHaveLength(2);
    expect(await replaysOf(src)).toEqual([a.body.id]);
    expect((await h.waitFor(a.body.id, ['succeeded'])).input).toEqual({ v: 2 });
    // Answered again once the run has moved on: the run as it is now.
    const later = await replay(src, { input: { v: 2 } });
    expect(later.body).toMatchObject({ id: a.body.id, status: 'succeeded' });
    expect((await h.call('control.list', { query: { runId: src, action: 'replay' } })).body).toHaveLength(1);

    // The key with another body, another run or another action: refused, nothing made.
    await expectError(replay(src, { input: { v: 3 } }), 422, 'idempotency_key_reused');
    await expectError(replay(src), 422, 'idempotency_key_reused');
    await expectError(replay(other), 422, 'idempotency_key_reused');
    await expectError(h.call('runs.retryFromStep', { params: { id: src }, body: { step: 'b' }, headers: { 'idempotency-key': key } }), 422, 'idempotency_key_reused');
    expect(await replaysOf(src)).toEqual([a.body.id]);
    expect(await replaysOf(other)).toEqual([]);

    // Without a key, or with a fresh one, each call is a new run.
    const plain = await h.call('runs.replay', { params: { id: src } });
    const fresh = await replay(src, undefined, `${key}-2`);
    expect(new Set([a.body.id, plain.body.id, fresh.body.id]).size).toBe(3);

    // Past its 24 h the key is free again, for any call.
    await h.db.query(`update scheduler.fork_keys set expires_at = now() - interval '1 second' where key = $1`, [key]);
    const anew = await replay(other);
    expect(anew.headers['idempotent-replayed']).toBeUndefined();
    expect(await replaysOf(other)).toEqual([anew.body.id]);
    expect((await replay(other)).body.id).toBe(anew.body.id);
  });

  it('retries from a step once per Idempotency-Key', async () => {
    const src = await h.start('fails', { fixed: false });
    await h.waitFor(src, ['failed']);
    const retry = () => h.call('runs.retryFromStep', { params: { id: src }, body: { step: 'b' }, headers: { 'idempotency-key': `r-${src}` } });
    const [a, b] = await Promise.all([retry(), retry()]);
    expect(b.body.id).toBe(a.body.id);
    expect((await retry()).headers['idempotent-replayed']).toBe('true');
    const forks = await h.db.query<{ id: string }>('select id from scheduler.runs where replay_of = $1', [src]);
    expect(forks.map((r) => r.id)).toEqual([a.body.id]);
    await h.waitFor(a.body.id, ['failed']);
  });

  it('retries from a step, carrying the steps before it', async () => {
    const src = await h.start('fails', { fixed: false });
    await h.waitFor(src, ['failed']);
    await expectError(h.call('runs.retryFromStep', { params: { id: src }, body: {} }), 400, 'step_required');
    await expectError(h.call('runs.retryFromStep', { params: { id: src }, body: { step: 'nope' } }), 404, 'step_not_found');
    const res = await h.call('runs.retryFromStep', { params: { id: src }, body: { step: 'b' } });
    expect(res.body.replayOf).toBe(src);
    const newRun = await h.waitFor(res.body.id, ['failed', 'succeeded']);
    // Step a was carried, not re-executed.
    expect(invoker.count(res.body.id, 'a')).toBe(0);
    expect(invoker.count(res.body.id, 'b')).toBe(1);
    expect(newRun.status).toBe('failed'); // same input, same failure: the point is where it resumed
  });

  it('bulk-replays finished runs, skipping unfinished ones; requires a filter', async () => {
    await expectError(h.call('runs.bulkReplay', { body: {} }), 400, 'filter_required');
    const done = await h.start('three', {}, { app: 'bulk' });
    await h.waitFor(done, ['succeeded']);
    const live = await h.start('sleeper', {}, { app: 'bulk' });
    await h.waitFor(live, ['waiting']);
    const res = await h.call('runs.bulkReplay', { body: { app: 'bulk' } });
    expect(res.body).toEqual({ matched: 2, replayed: 1, skipped: 1, failed: 0, capped: false });
    await h.call('runs.cancel', { params: { id: live } });
  });

  it('bulk-replays once per Idempotency-Key: a repeat, even two at once, replays nothing again nor the first call\'s own replays; the key on another filter is 422', async () => {
    const app = `bulk-key-${Date.now()}`;
    const sources = [await h.start('fails', {}, { app }), await h.start('fails', {}, { app })];
    for (const id of sources) await h.waitFor(id, ['failed']);
    const key = `bulk-${Date.now()}`;
    const call = () => h.call('runs.bulkReplay', { body: { app, status: 'failed' }, headers: { 'idempotency-key': key } });
    const first = await call();
    expect(first.body).toEqual({ matched: 2, replayed: 2, skipped: 0, failed: 0, capped: false });
    expect(first.headers?.['idempotent-replayed']).toBeUndefined();
    const replays = await h.db.query<{ id: string }>('select id from scheduler.runs where app = $1 and replay_of is not null', [app]);
    expect(replays).toHaveLength(2);
    // The replays fail too, and match the filter now: a repeat does not replay them, nor the sources again.
    for (const r of replays) await h.waitFor(r.id, ['failed']);
    const [again, twice] = await Promise.all([call(), call()]);
    for (const res of [again, twice]) {
      expect(res.body).toEqual({ matched: 2, replayed: 2, skipped: 0, failed: 0, capped: false });
      expect(res.headers?.['idempotent-replayed']).toBe('true');
    }
    expect(await h.db.query('select id from scheduler.runs where app = $1 and replay_of is not null', [app])).toHaveLength(2);
    await expectError(h.call('runs.bulkReplay', { body: { app, status: 'succeeded' }, headers: { 'idempotency-key': key } }), 422, 'idempotency_key_reused');
    // Without a key each call replays again: now the sources and their replays.
    expect((await h.call('runs.bulkReplay', { body: { app, status: 'failed' } })).body).toMatchObject({ matched: 4, replayed: 4 });
  });

  it('bulk-cancels the runs that have not ended matching a filter and its `if`, each audited as its cancel; refuses what would widen it', async () => {
    await expectError(h.call('runs.bulkCancel', { body: {} }), 400, 'filter_required');
    await expectError(h.call('runs.bulkCancel', { body: { status: 'failed' } }), 400, 'invalid_status');
    await expectError(h.call('runs.bulkCancel', { body: { app: 'bc', wokflow: 'sleeper' } }), 400, 'invalid_body');
    await expectError(h.call('runs.bulkCancel', { body: { app: 'bc', if: 'event.data.n >' } }), 400, 'invalid_if');
    await expectError(h.call('runs.bulkCancel', { body: { app: 'bc', until: 'later' } }), 400, 'invalid_until');
    await expectError(h.call('runs.bulkReplay', { body: { app: 'bc', statuses: ['failed'] } }), 400, 'invalid_body');
    const done = await h.start('three', { n: 3 }, { app: 'bc' });
    await h.waitFor(done, ['succeeded']);
    const [one, two, three] = [await h.start('sleeper', { n: 1 }, { app: 'bc' }), await h.start('sleeper', { n: 2 }, { app: 'bc' }), await h.start('sleeper', { n: 3 }, { app: 'bc' })];
    const other = await h.start('sleeper', { n: 3 }, { app: 'bc-other' });
    for (const id of [one, two, three, other]) await h.waitFor(id, ['waiting']);
    // The walk's keyset pages: newest first, each page below the last row of the one before.
    const first = await activeForBulk(h.db, WS, { app: 'bc' }, undefined, 2);
    const second = await activeForBulk(h.db, WS, { app: 'bc' }, first[1], 2);
    expect([first.length, second.length]).toEqual([2, 1]);
    expect(new Set([...first, ...second].map((r) => r.id))).toEqual(new Set([one, two, three]));
    expect(first[0]!.pos >= first[1]!.pos && first[1]!.pos >= second[0]!.pos).toBe(true);

    const res = await h.call('runs.bulkCancel', { body: { app: 'bc', if: 'event.data.n >= 2' } });
    expect(res.body).toEqual({ matched: 2, cancelled: 2, skipped: 0, failed: 0, capped: false });
    expect((await h.call('runs.get', { params: { id: one } })).body.status).toBe('waiting');
    expect((await h.call('runs.get', { params: { id: done } })).body.status).toBe('succeeded');
    expect((await h.call('runs.get', { params: { id: other } })).body.status).toBe('waiting');
    for (const id of [two, three]) {
      const run = (await h.call('runs.get', { params: { id } })).body;
      expect(run).toMatchObject({ status: 'cancelled', error: { message: 'Cancelled by tester in a bulk cancel.' } });
      const audit = (await h.call('control.list', { query: { runId: id } })).body;
      expect(audit).toMatchObject([{ action: 'cancel', runId: id, actor: 'tester', detail: { bulkCancel: { app: 'bc', if: 'event.data.n >= 2' } } }]);
    }

    // until: only the runs created before it (here none), then the rest of the app.
    expect((await h.call('runs.bulkCancel', { body: { app: 'bc', until: '2020-01-01T00:00:00Z' } })).body).toMatchObject({ matched: 0, cancelled: 0 });
    expect((await h.call('runs.bulkCancel', { body: { app: 'bc', status: 'running' } })).body).toEqual({ matched: 1, cancelled: 1, skipped: 0, failed: 0, capped: false });
    expect((await h.call('runs.get', { params: { id: one } })).body.status).toBe('cancelled');
    expect((await h.call('runs.bulkCancel', { body: { app: 'bc' } })).body.matched).toBe(0);
    await h.call('runs.cancel', { params: { id: other } });
  });

  it('a cancelOn applied before its run arrived cancels the run as it is stored, when the run started before the event and if holds', async () => {
    const t = Date.now();
    const event = { name: 'order.cancelled', data: { orderId: `o1-${mode}` }, id: `evt_cancel_${mode}`, ts: new Date(t).toISOString() };
    const matches = [{ app: 'co', workflow: 'sleeper', if: 'async.data.orderId == event.data.orderId' }];
    expect((await h.call('runs.cancelOn', { body: { event, matches } })).body).toEqual({ cancelled: [] });

    const start = (orderId: string, createdAtMs: number) => h.start('sleeper', { orderId }, { app: 'co', flow: { cancelOn: true, createdAtMs: BigInt(createdAtMs) } });
    const late = await start(`o1-${mode}`, t - 500); // its event came before the cancel; its StartRun after
    const other = await start(`o2-${mode}`, t - 500); // if does not hold
    const newer = await start(`o1-${mode}`, t + 500); // started after the cancel event
    await h.waitFor(late, ['cancelled']);
    expect((await h.call('runs.get', { params: { id: late } })).body.error).toEqual({ message: `Cancelled by event order.cancelled (${event.id}): it matched the workflow's cancelOn.` });
    expect((await h.call('control.list', { query: { runId: late } })).body).toMatchObject([
      { action: 'cancel', runId: late, actor: 'tester', detail: { cancelOn: { event: 'order.cancelled', eventId: event.id } } },
    ]);
    for (const id of [other, newer]) await h.waitFor(id, ['waiting']);
    for (const id of [other, newer]) await h.call('runs.cancel', { params: { id } });
  });

  it('audits every action with the actor, newest first, filterable', async () => {
    const all = (await h.call('control.list', { query: { limit: '1000' } })).body;
    expect(all.length).toBeGreaterThan(5);
    expect(all[0].actor).toBe('tester');
    const ids = all.map((a: any) => Number(a.id));
    expect(ids).toEqual([...ids].sort((a, b) => b - a));
    const cancels = (await h.call('control.list', { query: { action: 'cancel' } })).body;
    expect(cancels.every((a: any) => a.action === 'cancel')).toBe(true);
    const retry = (await h.call('control.list', { query: { action: 'retry_from_step' } })).body[0];
    expect(retry.detail).toEqual({ step: 'b' });
    const forRun = (await h.call('control.list', { query: { runId: retry.newRunId } })).body;
    expect(forRun.map((a: any) => a.action)).toContain('retry_from_step');
  });
});
