import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import {
  ApiRequestSchema,
  create,
  EmitEventSchema,
  fromBinary,
  ModelCeilingReachedSchema,
  ResolveStepSchema,
  RunFinishedSchema,
  StepFailedSchema,
  StepHandoffSchema,
  toBinary,
  WorkspaceUpsertedSchema,
} from '@dws/proto';
import { streams, subjects } from '@dws/runtime';
import { modes, ScriptedInvoker, startHarness, until, WS, type Harness } from './harness.js';

jest.setTimeout(60_000);

const invoker = new ScriptedInvoker({
  three: () => [{ run: 'a' }, { run: 'b' }, { run: 'c' }],
  sleepy: () => [{ run: 'before' }, { sleep: 'nap', ms: 400 }, { run: 'after' }],
  pastDeadline: () => [{ sleepUntil: 'then', at: Date.now() - 60_000 }, { run: 'done' }],
  waiter: () => [{ wait: 'approval', event: 'order.approved', if: 'event.data.orderId == "o-1"', timeoutMs: 60_000 }, { run: 'ship' }],
  hangParent: () => [{ child: 'kid', workflow: 'hang' }],
  plainWaiter: () => [{ wait: 'go', event: 'dl.go', timeoutMs: 60_000 }, { run: 'after' }],
  shortWait: () => [{ wait: 'nothing', event: 'never.sent', timeoutMs: 300 }, { run: 'after' }],
  parent: () => [{ child: 'kid', workflow: 'three', data: { from: 'parent' } }, { run: 'after-child' }],
  failingParent: () => [{ child: 'kid', workflow: 'fatal' }],
  flaky: () => [{ run: 'flaky', fn: (n) => { if (n < 3) throw new Error(`attempt ${n} failed`); return { ok: n }; } }],
  fatal: () => [{ run: 'boom', fn: () => { throw new Error('no retry'); }, retriable: false }],
  exhausted: () => [{ run: 'always', fn: () => { throw new Error('always fails'); } }],
  caught: () => [{ run: 'always', fn: () => { throw new Error('handled'); }, catchError: true }, { run: 'next' }],
  fanout: () => [{ parallel: ['p1', 'p2', 'p3'] }, { run: 'join' }],
  twenty: () => Array.from({ length: 20 }, (_, i) => ({ run: `s${i + 1}` })),
  emitter: () => [{ emit: 'announce', event: 'thing.happened', data: { x: 1 } }, { run: 'after' }],
  hang: () => [{ run: 'first' }, { sleep: 'long', ms: 3_600_000 }],
  thinker: () => [{ infer: 'ask', model: 'any' }, { run: 'after' }],
  scorer: () => [{ run: 'answer' }, { score: 'grade', name: 'accuracy', value: 0.9, note: 'checked by hand' }, { run: 'after' }, { run: 'last' }],
});

describe.each(modes())('scheduler engine (%s)', (mode) => {
  let h: Harness;
  /** The run's wait is registered (its waiters row), so a wake can find it. */
  const waiting = (runId: string) =>
    until(async () => (await h.db.query('select 1 from scheduler.waiters where run_id = $1', [runId])).length > 0, 10_000, `run ${runId}'s waiter`);
  beforeAll(async () => {
    h = await startHarness(mode, invoker);
    await h.register('app', [
      { name: 'flaky', retry: { maxAttempts: 3 } },
      { name: 'exhausted', retry: { maxAttempts: 2 } },
      { name: 'caught', retry: { maxAttempts: 1 } },
      { name: 'fatal', retry: { maxAttempts: 5 }, onFailure: true },
    ]);
  });
  afterAll(async () => h?.close());

  it('runs steps pass after pass to succeeded, with gap-free frames', async () => {
    const id = await h.start('three', { n: 1 });
    const run = await h.waitFor(id, ['succeeded']);
    expect(run.result.results).toEqual({ a: { step: 'a' }, b: { step: 'b' }, c: { step: 'c' } });
    expect(['a', 'b', 'c'].map((s) => invoker.count(id, s))).toEqual([1, 1, 1]);
    const frames = await h.db.query<{ seq: number; kind: string; payload: any }>('select seq, kind, payload from scheduler.frames where run_id = $1 order by seq', [id]);
    expect(frames.map((f) => f.seq)).toEqual(frames.map((_, i) => i + 1));
    expect(frames.filter((f) => f.kind === 'run_status').map((f) => f.payload.status)).toEqual(['queued', 'running', 'succeeded']);
    // The handler-level log line is sent on every pass and stored once.
    expect(frames.filter((f) => f.kind === 'log')).toHaveLength(1);
  });

  it('sleeps: parks waiting, wakes at the resolved time, and resumes', async () => {
    const t0 = Date.now();
    const id = await h.start('sleepy');
    await h.waitFor(id, ['waiting']);
    const run = await h.waitFor(id, ['succeeded']);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(400);
    expect(run.result.results.nap).toBeNull();
    const steps = (await h.call('runs.steps', { params: { id } })).body;
    expect(steps.map((s: any) => [s.name, s.status])).toEqual([['before', 'succeeded'], ['nap', 'succeeded'], ['after', 'succeeded']]);
  });

  it('a run woken from its sleep reads running while its next pass is out, not only once that pass is stored', async () => {
    const id = await h.start('sleepy');
    await h.waitFor(id, ['waiting']);
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let out = false;
    invoker.hold = async (runId) => {
      if (runId !== id) return;
      out = true;
      await held;
    };
    try {
      await until(async () => out, 10_000, 'the pass after the wake');
      await until(async () => (await h.call('runs.get', { params: { id } })).body.status === 'running', 5_000, 'the run to read running');
      const frames = await h.db.query<{ payload: any }>(`select payload from scheduler.frames where run_id = $1 and kind = 'run_status' order by seq`, [id]);
      expect(frames.map((f) => f.payload.status)).toEqual(['queued', 'running', 'waiting', 'running']);
    } finally {
      invoker.hold = undefined;
      release();
    }
    await h.waitFor(id, ['succeeded']);
    const all = await h.db.query<{ seq: number; kind: string; payload: any }>('select seq, kind, payload from scheduler.frames where run_id = $1 order by seq', [id]);
    expect(all.map((f) => f.seq)).toEqual(all.map((_, i) => i + 1));
    expect(all.filter((f) => f.kind === 'run_status').map((f) => f.payload.status)).toEqual(['queued', 'running', 'waiting', 'running', 'succeeded']);
  });

  it('a SleepUntil in the past wakes on the next cycle', async () => {
    const id = await h.start('pastDeadline');
    await h.waitFor(id, ['succeeded'], 5_000);
  });

  it('waitForEvent resumes on a matching event (name + eventIf) with the event, and not on others', async () => {
    const id = await h.start('waiter');
    await h.waitFor(id, ['waiting']);
    await waiting(id);
    expect((await h.call('waiters.wake', { body: { name: 'order.approved', data: { orderId: 'o-2' } } })).body).toEqual({ woke: 0 });
    expect((await h.call('waiters.wake', { body: { name: 'other', data: { orderId: 'o-1' } } })).body).toEqual({ woke: 0 });
    expect((await h.call('waiters.wake', { body: { name: 'order.approved', data: { orderId: 'o-1' }, id: 'evt_1' } })).body).toEqual({ woke: 1 });
    const run = await h.waitFor(id, ['succeeded']);
    expect(run.result.results.approval).toMatchObject({ name: 'order.approved', data: { orderId: 'o-1' }, id: 'evt_1' });
    // A second matching event finds nobody waiting.
    expect((await h.call('waiters.wake', { body: { name: 'order.approved', data: { orderId: 'o-1' } } })).body).toEqual({ woke: 0 });
  });

  it('waiters.wakeMany wakes for each event in order, answering per event', async () => {
    const id = await h.start('waiter');
    await h.waitFor(id, ['waiting']);
    await waiting(id);
    const events = [
      { name: 'other', data: { orderId: 'o-1' } },
      { name: 'order.approved', data: { orderId: 'o-2' } },
      { data: {} },
      { name: 'order.approved', data: { orderId: 'o-1' }, id: 'evt_first' },
      { name: 'order.approved', data: { orderId: 'o-1' }, id: 'evt_second' },
    ];
    // The nameless one wakes nobody; of the two matching, the first in the batch wins.
    expect((await h.call('waiters.wakeMany', { body: { events } })).body).toEqual({ woke: [0, 0, 0, 1, 0] });
    const run = await h.waitFor(id, ['succeeded']);
    expect(run.result.results.approval).toMatchObject({ id: 'evt_first' });
    expect((await h.call('waiters.wakeMany', { body: { events: [] } })).body).toEqual({ woke: [] });
    await expect(h.call('waiters.wakeMany', { body: { events: 'x' } })).rejects.toMatchObject({ status: 400 });
  });

  // A cancel locks its run, then deletes the run's waiters; a wait's timeout locks its step, then
  // deletes the waiter. A wake that held the waiters while it locked steps and runs deadlocked with
  // both (Postgres aborted one after deadlock_timeout: the wake's API call answered 500).
  it.each([
    ['a cancel (the run locked)', 'select 1 from scheduler.runs where id = $1 for update', 2],
    // As a claim finds the wait timed out: the step resolved with null, the run due.
    ['a timeout (the step resolved)', "with s as (update scheduler.steps set status = 'succeeded', data = 'null' where run_id = $1 and status = 'waiting' returning run_id) update scheduler.runs r set lease_until = now() from s where r.id = s.run_id", 1],
  ])('a wake racing %s neither deadlocks nor fails', async (_what, lockSql, woke) => {
    if (mode !== 'real') return; // one connection on PGlite: nothing runs concurrently
    const a = await h.start('plainWaiter');
    await waiting(a);
    const b = await h.start('plainWaiter');
    await waiting(b);
    let wake: Promise<unknown> | undefined;
    await h.db.tx(async (tx) => {
      await tx.query(lockSql, [b]);
      wake = h.call('waiters.wake', { body: { name: 'dl.go', data: {} } });
      await new Promise((r) => setTimeout(r, 300)); // the wake resolves a's step and waits on b's row
      await tx.query('delete from scheduler.waiters where run_id = $1', [b]);
    });
    await expect(wake).resolves.toMatchObject({ body: { woke } });
    await h.waitFor(a, ['succeeded']);
    await h.waitFor(b, ['succeeded']);
  });

  // A child's end locks the child, then its parent (the parent's step resolves); a parent's cancel
  // locks the parent, then its children. Postgres breaks the cycle by aborting one: it is run again.
  it("a parent's cancel racing its child's end neither deadlocks nor fails", async () => {
    if (mode !== 'real') return; // one connection on PGlite: nothing runs concurrently
    const parent = await h.start('hangParent');
    const childOf = async () => (await h.db.query<{ id: string }>('select id from scheduler.runs where parent_run_id = $1', [parent]))[0];
    await until(async () => (await childOf()) !== undefined, 10_000, 'the child');
    const child = (await childOf())!;
    await h.waitFor(child.id, ['waiting']);
    let cancel: Promise<unknown> | undefined;
    await h.db.tx(async (tx) => {
      await tx.query('select 1 from scheduler.runs where id = $1 for update', [child.id]);
      cancel = h.call('runs.cancel', { params: { id: parent } });
      await new Promise((r) => setTimeout(r, 300)); // the cancel holds the parent and waits on the child
      await tx.query('select 1 from scheduler.runs where id = $1 for update', [parent]);
    });
    await expect(cancel).resolves.toMatchObject({ body: { status: 'cancelled' } });
    expect((await h.call('runs.get', { params: { id: child.id } })).body.status).toBe('cancelled');
  });

  it('a wake ingest could not deliver at once arrives as a command and resumes the run', async () => {
    const id = await h.start('waiter');
    await h.waitFor(id, ['waiting']);
    await waiting(id);
    const req = create(ApiRequestSchema, {
      workspaceId: WS, actor: 'ingest', keyKind: 'internal', requestId: '', op: 'waiters.wake',
      body: new TextEncoder().encode('{"params":{},"query":{},"body":{"name":"order.approved","data":{"orderId":"o-1"},"id":"evt_deferred"}}'),
    });
    await h.bus.publish(subjects.schedulerApiCommand, toBinary(ApiRequestSchema, req), { msgId: 'wake:evt_deferred' });
    const run = await h.waitFor(id, ['succeeded']);
    expect(run.result.results.approval).toMatchObject({ id: 'evt_deferred', data: { orderId: 'o-1' } });
  });

  it('waitForEvent resolves with null on timeout', async () => {
    const id = await h.start('shortWait');
    const run = await h.waitFor(id, ['succeeded']);
    expect(run.result.results.nothing).toBeNull();
  });

  it('runWorkflow starts a child and resumes the parent with its result', async () => {
    const id = await h.start('parent');
    const run = await h.waitFor(id, ['succeeded']);
    expect(run.result.results.kid.results).toEqual({ a: { step: 'a' }, b: { step: 'b' }, c: { step: 'c' } });
    const children = await h.db.query<{ id: string; parent_run_id: string; status: string }>('select id, parent_run_id, status from scheduler.runs where parent_run_id = $1', [id]);
    expect(children).toHaveLength(1);
    expect(children[0]!.status).toBe('succeeded');
  });

  it("a child's failure fails the parent's step", async () => {
    const id = await h.start('failingParent');
    const run = await h.waitFor(id, ['failed']);
    expect(run.error.message).toBe('no retry');
  });

  it('retries a failing step with backoff up to maxAttempts; the memo never holds a retried error', async () => {
    const id = await h.start('flaky');
    const run = await h.waitFor(id, ['succeeded'], 20_000);
    expect(run.result.results.flaky).toEqual({ ok: 3 });
    expect(invoker.count(id, 'flaky')).toBe(3);
    expect(run.attempt).toBe(3);
    const memos = invoker.bodies.filter((b) => b.ctx.runId === id).map((b) => Object.values(b.steps));
    expect(memos.flat().some((m: any) => 'error' in m)).toBe(false);
  });

  it('fails after maxAttempts; a caught step error lets the run go on', async () => {
    const a = await h.start('exhausted');
    const failed = await h.waitFor(a, ['failed'], 20_000);
    expect(failed.error.message).toBe('always fails');
    expect(invoker.count(a, 'always')).toBe(2);
    const b = await h.start('caught');
    const ok = await h.waitFor(b, ['succeeded']);
    expect(ok.result.results.always).toEqual({ caught: 'handled' });
  });

  it('retriable: false fails the run at once and spawns the onFailure run with ctx.error', async () => {
    const id = await h.start('fatal');
    const run = await h.waitFor(id, ['failed']);
    expect(invoker.count(id, 'boom')).toBe(1);
    expect(run.error.message).toBe('no retry');
    const follow = await h.db.query<{ id: string }>('select id from scheduler.runs where on_failure_of = $1', [id]);
    expect(follow).toHaveLength(1);
    const onFailure = await h.waitFor(follow[0]!.id, ['succeeded', 'failed']);
    expect(onFailure.status).toBe('failed'); // the script fails again; no second follow-on is spawned
    const body = invoker.bodies.find((b) => b.ctx.runId === follow[0]!.id);
    expect(body.ctx).toMatchObject({ onFailure: true, error: { message: 'no retry' } });
    expect(await h.db.query('select 1 from scheduler.runs where on_failure_of = $1', [follow[0]!.id])).toHaveLength(0);
  });

  it('persists every opcode of a parallel 206 and continues', async () => {
    const id = await h.start('fanout');
    await h.waitFor(id, ['succeeded']);
    const steps = (await h.call('runs.steps', { params: { id } })).body;
    expect(steps.map((s: any) => s.name)).toEqual(['p1', 'p2', 'p3', 'join']);
  });

  it('emit is handed to ingest exactly once, with an event id memoised on the step', async () => {
    const id = await h.start('emitter');
    const run = await h.waitFor(id, ['succeeded']);
    const eventId = run.result.results.announce.id as string;
    expect(eventId).toMatch(/^evt_/);
    // Published means gone from the outbox; then read the stream in order up to a marker sent after it.
    await until(async () => (await h.db.query('select 1 from scheduler.outbox where subject like $1', ['%ingest.cmd.emit'])).length === 0, 15_000, 'the emit to leave the outbox');
    const marker = `evt_marker_${Date.now()}`;
    const seen: string[] = [];
    const sub = await h.bus.consume(
      { stream: streams.ingestCmds.name, durable: `emits${Date.now()}`, filterSubject: subjects.emitEvent, concurrency: 1 },
      async (m) => void seen.push(fromBinary(EmitEventSchema, m.data).eventId),
    );
    try {
      await h.bus.publish(subjects.emitEvent, toBinary(EmitEventSchema, create(EmitEventSchema, { workspaceId: 'ws_marker', eventId: marker, name: 'marker' })));
      await until(() => seen.includes(marker), 15_000, 'the marker emit');
    } finally {
      await sub.stop();
    }
    expect(seen.filter((e) => e === eventId)).toHaveLength(1);
  });

  it('hands an Infer step to the invoker and parks it; the ResolveStep completes it with its usage', async () => {
    const handed: { runId: string; stepId: string; opcode: any }[] = [];
    await h.bus.ensureStream(streams.invokerCmds);
    const sub = await h.bus.consume({ stream: streams.invokerCmds.name, durable: `infer${Date.now()}`, filterSubject: subjects.requestInference }, async (m) => {
      const x = fromBinary(StepHandoffSchema, m.data);
      handed.push({ runId: x.runId, stepId: x.stepId, opcode: JSON.parse(new TextDecoder().decode(x.opcode)) });
    });
    try {
      const id = await h.start('thinker');
      await until(() => handed.some((x) => x.runId === id), 10_000, 'the Infer hand-off');
      const handoff = handed.find((x) => x.runId === id)!;
      expect(handoff.opcode).toMatchObject({ op: 'Infer', data: { model: 'any' } });
      await h.waitFor(id, ['waiting']);
      const usage = { model: 'any', tokensIn: 3, tokensOut: 5, latencyMs: 12 };
      await h.bus.publish(
        subjects.resolveStep,
        toBinary(ResolveStepSchema, create(ResolveStepSchema, { workspaceId: WS, runId: id, stepId: handoff.stepId, data: new TextEncoder().encode('{"text":"hi"}'), usage: new TextEncoder().encode(JSON.stringify(usage)) })),
      );
      const run = await h.waitFor(id, ['succeeded']);
      expect(run.result.results.ask).toEqual({ text: 'hi' });
      const steps = (await h.call('runs.steps', { params: { id } })).body;
      expect(steps.find((s: any) => s.name === 'ask')).toMatchObject({ op: 'Infer', status: 'succeeded', output: { text: 'hi' }, usage });
    } finally {
      await sub.stop();
    }
  });

  it("refuses a model call at the workspace's monthly model ceiling (the gateway's fact), reports it, and keeps to the fact", async () => {
    const ceilings = (modelTokensPerMonth: number) =>
      h.bus.publish(
        subjects.workspaceUpserted,
        toBinary(WorkspaceUpsertedSchema, create(WorkspaceUpsertedSchema, { workspaceId: WS, name: WS, signingKey: 'k', modelTokensPerMonth })),
      );
    const handed: { runId: string; stepId: string }[] = [];
    const reported: { month: string; tokens: number }[] = [];
    await h.bus.ensureStream(streams.invokerCmds);
    await h.bus.ensureStream(streams.schedulerFacts);
    await h.bus.ensureStream(streams.gatewayFacts);
    const subs = [
      await h.bus.consume({ stream: streams.invokerCmds.name, durable: `infer-ceiling${Date.now()}`, filterSubject: subjects.requestInference }, async (m) => {
        const x = fromBinary(StepHandoffSchema, m.data);
        handed.push({ runId: x.runId, stepId: x.stepId });
      }),
      await h.bus.consume({ stream: streams.schedulerFacts.name, durable: `ceiling${Date.now()}`, filterSubject: subjects.modelCeilingReached }, async (m) => {
        const x = fromBinary(ModelCeilingReachedSchema, m.data);
        if (x.workspaceId === WS) reported.push({ month: x.month, tokens: x.tokens });
      }),
    ];
    try {
      // What this workspace's steps recorded this month so far (other tests' model calls).
      const [row] = await h.db.query<{ used: number }>(
        `select coalesce(sum((usage->>'tokensIn')::numeric + (usage->>'tokensOut')::numeric), 0)::float8 as used from scheduler.steps
          where workspace_id = $1 and usage is not null and ended_at >= date_trunc('month', now() at time zone 'UTC') at time zone 'UTC'`,
        [WS],
      );
      const used = Number(row!.used);
      await ceilings(used + 5);
      await until(async () => (await h.db.query('select 1 from scheduler.model_ceilings where workspace_id = $1', [WS])).length === 1, 10_000, 'the ceilings');

      // Under it: the call is handed over and its usage (8 tokens) recorded.
      const first = await h.start('thinker');
      await until(() => handed.some((x) => x.runId === first), 10_000, 'the Infer hand-off');
      await h.waitFor(first, ['waiting']);
      const usage = new TextEncoder().encode(JSON.stringify({ model: 'any', tokensIn: 3, tokensOut: 5 }));
      const stepId = handed.find((x) => x.runId === first)!.stepId;
      await h.bus.publish(
        subjects.resolveStep,
        toBinary(ResolveStepSchema, create(ResolveStepSchema, { workspaceId: WS, runId: first, stepId, data: new TextEncoder().encode('{"text":"hi"}'), usage })),
      );
      await h.waitFor(first, ['succeeded']);

      // At it: not handed over; the step fails naming the ceiling, and the gateway is told.
      const second = await h.start('thinker');
      const failed = await h.waitFor(second, ['failed']);
      const month = new Date().toISOString().slice(0, 7);
      const message = `Workspace model usage ceiling reached: this workspace used ${used + 8} model tokens of its ${used + 5} for ${month} (UTC).`;
      expect(failed.error).toMatchObject({ message });
      const steps = (await h.call('runs.steps', { params: { id: second } })).body;
      expect(steps.find((s: any) => s.name === 'ask')).toMatchObject({ op: 'Infer', status: 'failed', error: { message } });
      await until(() => reported.length > 0, 10_000, 'the ModelCeilingReached fact');
      expect(reported).toEqual([{ month, tokens: used + 8 }]);
      expect(handed.some((x) => x.runId === second)).toBe(false);

      // The ceiling removed (a fact with none): the row goes, and calls are made again.
      await ceilings(0);
      await until(async () => (await h.db.query('select 1 from scheduler.model_ceilings where workspace_id = $1', [WS])).length === 0, 10_000, 'no ceilings');
      const third = await h.start('thinker');
      await until(() => handed.some((x) => x.runId === third), 10_000, 'the Infer hand-off once the ceiling is gone');
    } finally {
      await ceilings(0);
      for (const sub of subs) await sub.stop();
    }
  });

  it('writes one score row per Score step, however many passes replay it, and serves them with GET scores', async () => {
    const id = await h.start('scorer');
    await h.waitFor(id, ['succeeded']);
    // Passes after the score replayed it from the memo: still one row.
    expect(invoker.bodies.filter((b) => b.ctx.runId === id).length).toBeGreaterThan(2);
    const scores = (await h.call('runs.scores', { params: { id } })).body;
    expect(scores).toEqual([{ id: expect.stringMatching(/^scr_/), runId: id, step: 'grade', name: 'accuracy', value: 0.9, note: 'checked by hand', createdAt: expect.any(String) }]);
    expect((await h.db.query('select 1 from scheduler.scores where run_id = $1', [id])).length).toBe(1);
  });

  it('publishes run and step lifecycle facts once (run.failed, step.failed, run.succeeded)', async () => {
    const facts: { subject: string; runId: string; status?: string; step?: string; nothingOpen?: boolean }[] = [];
    await h.bus.ensureStream(streams.schedulerFacts);
    const sub = await h.bus.consume({ stream: streams.schedulerFacts.name, durable: `t${Date.now()}`, filterSubject: 'scheduler.fact.>' }, async (m) => {
      if (m.subject === subjects.runFinished) {
        const f = fromBinary(RunFinishedSchema, m.data);
        facts.push({ subject: m.subject, runId: f.runId, status: f.status, nothingOpen: f.nothingOpen });
      } else {
        const f = fromBinary(StepFailedSchema, m.data);
        facts.push({ subject: m.subject, runId: f.runId, step: f.stepName });
      }
    });
    const failed = await h.start('exhausted');
    const ok = await h.start('three');
    await h.waitFor(failed, ['failed'], 20_000);
    await h.waitFor(ok, ['succeeded']);
    // Every fact is published once it leaves the outbox; a marker published after them closes the (ordered) read.
    await until(async () => (await h.db.query('select 1 from scheduler.outbox where subject like $1', ['%scheduler.fact.%'])).length === 0, 15_000, 'the facts to leave the outbox');
    await h.bus.publish(subjects.runFinished, toBinary(RunFinishedSchema, create(RunFinishedSchema, { workspaceId: 'ws_marker', runId: 'run_marker', status: 'succeeded' })));
    await until(() => facts.some((f) => f.runId === 'run_marker'), 15_000, 'the marker fact');
    await sub.stop();
    expect(facts.filter((f) => f.runId === failed)).toEqual([
      { subject: subjects.stepFailed, runId: failed, step: 'always' },
      // Nothing of these runs was left waiting: approvals need not look.
      { subject: subjects.runFinished, runId: failed, status: 'failed', nothingOpen: true },
    ]);
    expect(facts.filter((f) => f.runId === ok)).toEqual([{ subject: subjects.runFinished, runId: ok, status: 'succeeded', nothingOpen: true }]);
  });

  it('two replicas cancel each run past its timeouts.finish once, audited once', async () => {
    const r2 = await h.replica();
    try {
      const runIds = await Promise.all(Array.from({ length: 8 }, () => h.start('hang', {}, { flow: { timeoutFinishMs: 700n } })));
      for (const id of runIds) await h.waitFor(id, ['cancelled'], 20_000);
      // Both loops saw the same due runs: one cancel each, one audit entry, one cancelled frame.
      await new Promise((r) => setTimeout(r, 300));
      for (const id of runIds) {
        const audit = await h.db.query<{ actor: string; detail: unknown }>(`select actor, detail from scheduler.control_actions where run_id = $1`, [id]);
        expect(audit).toEqual([{ actor: 'system:timeout', detail: { timeout: { which: 'finish', ms: 700 } } }]);
        const ends = await h.db.query(`select 1 from scheduler.frames where run_id = $1 and kind = 'run_status' and payload->>'status' = 'cancelled'`, [id]);
        expect(ends).toHaveLength(1);
      }
    } finally {
      await r2.handle.stop();
    }
  });

  it('two replicas share the runs and never apply a reply twice', async () => {
    const r2 = await h.replica();
    const runIds = await Promise.all(Array.from({ length: 10 }, () => h.start('twenty')));
    for (const id of runIds) await h.waitFor(id, ['succeeded'], 30_000);
    for (const id of runIds) {
      for (let i = 1; i <= 20; i++) expect(invoker.count(id, `s${i}`)).toBe(1);
      const frames = await h.db.query<{ seq: number }>('select seq from scheduler.frames where run_id = $1 order by seq', [id]);
      expect(frames.map((f) => f.seq)).toEqual(frames.map((_, i) => i + 1));
    }
    await r2.handle.stop();
  });
});

describe.each(modes())('scheduler back-pressure (%s)', (mode) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(mode, invoker, { SERVICE_MAX_ACTIVE_RUNS: '1' });
  });
  afterAll(async () => h?.close());

  it('runs past SERVICE_MAX_ACTIVE_RUNS are stored queued at once and all finish', async () => {
    const runIds = await Promise.all(Array.from({ length: 6 }, (_, i) => h.start('three', { i })));
    // Stored without waiting for room: readable as queued (or already running) right away.
    for (const id of runIds) await h.waitFor(id, ['queued', 'running', 'succeeded'], 2_000);
    for (const id of runIds) await h.waitFor(id, ['succeeded'], 30_000);
    for (const id of runIds) expect(['a', 'b', 'c'].map((s) => invoker.count(id, s))).toEqual([1, 1, 1]);
  });
});
