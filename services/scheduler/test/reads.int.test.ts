import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { connectJetStreamBus, prefixedBus, type Bus, type Subscription } from '@dws/bus';
import type { Database } from '@dws/db';
import { createLogger } from '@dws/log';
import { callApi, ids, serveApi, type ApiCall, type ApiResult } from '@dws/runtime';
import { openTestDb, preparedPlan, testDatabaseUrl, testInfra, uniqueName, type TestDb } from '@dws/testing';
import { runReadsApi } from '../src/handlers/reads-api.js';
import { listRunsSql, RUN_SORTS, type RunListQuery } from '../src/store/reads.js';

const MIGRATIONS = fileURLToPath(new URL('../src/store/migrations', import.meta.url));

/**
 * The read side of the scheduler on real Postgres, with runs seeded straight
 * into scheduler.runs: every filter, sort and dir of GET /runs, keyset
 * cursors, paging while runs arrive, stats, logs, the stream backlog,
 * tenancy, and the index plans. With NATS there, every call goes over the
 * bus as the gateway makes it (serveApi <-> callApi); else straight to the handlers.
 */
const pg = testDatabaseUrl();
if (!pg) console.warn('\n!!! Postgres missing: scheduler read-side tests SKIPPED !!!\n');
const d = pg ? describe : describe.skip;

interface Seed {
  id?: string;
  workflow?: string;
  app?: string;
  status?: string;
  triggerKind?: string;
  eventId?: string | null;
  replayOf?: string | null;
  input?: string;
  result?: string | null;
  error?: unknown;
  createdAtMs?: number;
  durationMs?: number | null;
}

async function seedRuns(db: Database, workspaceId: string, runs: Seed[]): Promise<string[]> {
  const rows = runs.map((r) => {
    const created = r.createdAtMs ?? Date.now();
    const finished = r.durationMs !== undefined && r.durationMs !== null;
    return {
      id: r.id ?? ids.run(),
      workspace_id: workspaceId,
      workflow: r.workflow ?? 'wf',
      app: r.app ?? 'app',
      status: r.status ?? (finished ? 'succeeded' : 'running'),
      trigger_kind: r.triggerKind ?? 'event',
      event_id: r.eventId ?? null,
      event_name: r.eventId ? 'evt.name' : null,
      replay_of: r.replayOf ?? null,
      input: r.input ?? '{}',
      result: r.result ?? null,
      error: r.error ?? null,
      created_ms: created,
      started_ms: created + 5,
      ended_ms: finished ? created + 5 + r.durationMs! : null,
    };
  });
  await db.query(
    `insert into scheduler.runs (id, workspace_id, workflow, app, status, trigger_kind, event_id, event_name, replay_of,
                                 input, result, error, created_at, started_at, ended_at)
     select id, workspace_id, workflow, app, status, trigger_kind, event_id, event_name, replay_of, input, result, error,
            to_timestamp(created_ms / 1000.0), to_timestamp(started_ms / 1000.0),
            case when ended_ms is null then null else to_timestamp(ended_ms / 1000.0) end
       from jsonb_to_recordset($1::jsonb) as x(id text, workspace_id text, workflow text, app text, status text, trigger_kind text,
            event_id text, event_name text, replay_of text, input text, result text, error jsonb, created_ms bigint, started_ms bigint,
            ended_ms bigint)`,
    [JSON.stringify(rows)],
  );
  return rows.map((r) => r.id);
}

d('scheduler read side', () => {
  let tdb: TestDb;
  let db: Database;
  let bus: Bus | undefined;
  let served: Subscription | undefined;
  let call: (op: string, workspaceId: string, p?: Partial<Omit<ApiCall, 'caller'>>) => Promise<ApiResult>;

  beforeAll(async () => {
    tdb = await openTestDb('sched_reads', { migrations: [{ schema: 'scheduler', migrationsDir: MIGRATIONS }], poolSize: 8 });
    db = tdb.db;
    const api = runReadsApi(db);
    const nats = testInfra()?.natsUrl;
    if (nats) {
      bus = prefixedBus(await connectJetStreamBus({ servers: nats, name: 'scheduler-reads-test' }), uniqueName('reads'));
      served = serveApi(bus, 'scheduler', createLogger({ level: 'silent' }), api);
      call = async (op, workspaceId, p = {}) => {
        const caller = { workspaceId, actor: 'test', keyKind: 'secret', requestId: 'r' };
        const r = await callApi(bus!, 'scheduler', op, caller, { params: p.params, query: p.query });
        return { status: r.status, body: r.bodyJson === undefined ? undefined : JSON.parse(r.bodyJson), headers: r.headers };
      };
    } else {
      call = (op, workspaceId, p = {}) =>
        api[op]!({ caller: { workspaceId, actor: 'test', keyKind: 'secret', requestId: 'r' }, params: p.params ?? {}, query: p.query ?? {}, body: undefined, headers: {} });
    }
  }, 60_000);
  afterAll(async () => {
    await served?.stop();
    await bus?.close();
    await tdb?.close();
  });

  const list = async (ws: string, query: Record<string, unknown>) => {
    const r = await call('runs.list', ws, { query });
    return { runs: r.body as { id: string; [k: string]: unknown }[], next: r.headers?.['x-next-cursor'] };
  };
  const all = async (ws: string, query: Record<string, unknown>) => {
    const out: string[] = [];
    let cursor: string | undefined;
    for (let i = 0; i < 10_000; i++) {
      const page = await list(ws, { ...query, ...(cursor ? { cursor } : {}) });
      out.push(...page.runs.map((r) => r.id));
      if (!page.next) return out;
      cursor = page.next;
    }
    throw new Error('paging did not end');
  };

  describe('filters, sorts and cursors', () => {
    const ws = uniqueName('ws');
    const seeded: (Seed & { id: string })[] = [];
    const t0 = Date.parse('2024-03-01T00:00:00Z');

    beforeAll(async () => {
      const specs: Seed[] = [];
      const statuses = ['queued', 'running', 'waiting', 'paused', 'succeeded', 'failed', 'cancelled'];
      for (let i = 0; i < 60; i++) {
        const status = statuses[i % statuses.length]!;
        const terminal = ['succeeded', 'failed', 'cancelled'].includes(status);
        specs.push({
          id: `run_${String(i).padStart(3, '0')}_${uniqueName('x')}`,
          workflow: ['alpha', 'Beta', 'gamma_100%'][i % 3],
          app: ['billing', 'mail'][i % 2],
          status,
          triggerKind: i % 5 === 0 ? 'cron' : 'event',
          eventId: i % 5 === 0 ? null : `evt_${i % 4}`,
          replayOf: i % 10 === 3 ? 'run_source' : null,
          input: JSON.stringify({ customer: i === 17 ? 'Needle Corp' : `c${i}` }),
          result: status === 'succeeded' && i === 25 ? JSON.stringify({ note: 'found the NEEDLE' }) : null,
          error: status === 'failed' && i === 26 ? { message: 'needle broke' } : null,
          // Several runs share a created_at, so ties are broken by id.
          createdAtMs: t0 + Math.floor(i / 3) * 1000,
          durationMs: terminal ? (i * 37) % 11 * 100 : null,
        });
      }
      const idsOut = await seedRuns(db, ws, specs);
      specs.forEach((s, i) => seeded.push({ ...s, id: idsOut[i]! }));
    });

    const expectOrder = (sort: string, dir: string, rows = seeded) => {
      const key = (r: Seed): string | number =>
        sort === 'workflow' ? r.workflow! : sort === 'status' ? r.status! : sort === 'app' ? r.app! : sort === 'duration' ? (r.durationMs ?? -1) : 0;
      const cmp = (a: Seed & { id: string }, b: Seed & { id: string }) => {
        const ka = key(a);
        const kb = key(b);
        // Postgres text order in the test database's collation: compare with the same rule it uses for plain ASCII (C/en_US agree here except case).
        if (ka !== kb) return typeof ka === 'number' ? ka - (kb as number) : 0;
        if (a.createdAtMs! !== b.createdAtMs!) return a.createdAtMs! - b.createdAtMs!;
        return a.id < b.id ? -1 : 1;
      };
      const sorted = [...rows].sort(cmp);
      return dir === 'desc' ? sorted.reverse() : sorted;
    };

    it.each(RUN_SORTS.flatMap((s) => [[s, 'asc'], [s, 'desc']]))('pages sort=%s dir=%s in order, every run once', async (sort, dir) => {
      const got = await all(ws, { sort, dir, limit: '7' });
      expect(new Set(got).size).toBe(got.length);
      expect(got.length).toBe(seeded.length);
      // Compare to the whole list in one page (the database's own collation for text keys).
      const one = (await list(ws, { sort, dir, limit: '200' })).runs.map((r) => r.id);
      expect(got).toEqual(one);
      if (sort === 'started' || sort === 'duration') expect(got).toEqual(expectOrder(sort, dir).map((r) => r.id));
      if (sort !== 'started' && sort !== 'duration') {
        // Within one key, (created_at, id) in dir.
        const byId = new Map(seeded.map((r) => [r.id, r]));
        const field = sort as 'workflow' | 'status' | 'app';
        for (let i = 1; i < got.length; i++) {
          const a = byId.get(got[i - 1]!)!;
          const b = byId.get(got[i]!)!;
          if (a[field] !== b[field]) continue;
          const order = a.createdAtMs! === b.createdAtMs! ? (a.id < b.id ? -1 : 1) : a.createdAtMs! - b.createdAtMs!;
          expect(dir === 'asc' ? order < 0 : order > 0).toBe(true);
        }
      }
    });

    it('defaults to sort=started dir=desc, 30 a page, and omits X-Next-Cursor on the last page', async () => {
      const first = await list(ws, {});
      expect(first.runs.map((r) => r.id)).toEqual(expectOrder('started', 'desc').slice(0, 30).map((r) => r.id));
      expect(first.next).toEqual(expect.any(String));
      const second = await list(ws, { cursor: first.next });
      expect(second.runs).toHaveLength(30);
      expect(second.next).toBeUndefined();
      expect((await list(ws, { limit: '60' })).next).toBeUndefined();
    });

    it('refuses a cursor reused with another sort or dir, and a forged one', async () => {
      const { next } = await list(ws, { sort: 'app', dir: 'asc', limit: '5' });
      await expect(call('runs.list', ws, { query: { sort: 'app', dir: 'desc', cursor: next } })).rejects.toMatchObject({ status: 400, code: 'invalid_cursor' });
      await expect(call('runs.list', ws, { query: { sort: 'workflow', dir: 'asc', cursor: next } })).rejects.toMatchObject({ status: 400, code: 'invalid_cursor' });
      await expect(call('runs.list', ws, { query: { cursor: next } })).rejects.toMatchObject({ status: 400, code: 'invalid_cursor' });
      const forged = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
      for (const c of ['garbage', '', forged({ s: 'started', d: 'desc', c: 'not a time', i: 'x' }), forged({ s: 'started', d: 'desc', c: '2024-01-01T00:00:00.000000Z', i: 5 }), forged([1]), forged(null), 'e30']) {
        if (c === '') continue;
        await expect(call('runs.list', ws, { query: { cursor: c } })).rejects.toMatchObject({ status: 400, code: 'invalid_cursor' });
      }
      // A well-formed cursor positioned anywhere is fine (keyset, not offset).
      const ok = forged({ s: 'duration', d: 'desc', k: 500, c: '2024-03-01T00:00:03.000000Z', i: 'run_z' });
      expect((await call('runs.list', ws, { query: { sort: 'duration', cursor: ok } })).status ?? 200).toBe(200);
    });

    it('validates and clamps limit, sort, dir, status, runType and since', async () => {
      expect((await list(ws, { limit: '5000' })).runs).toHaveLength(60);
      for (const query of [{ limit: '0' }, { limit: '-1' }, { limit: 'ten' }, { limit: '1.5' }, { sort: 'size' }, { dir: 'up' }, { status: 'done' }, { runType: 'child' }, { since: 'yesterday' }, { since: '2024-13-45' }, { until: 'soon' }, { q: 'x'.repeat(300) }, { app: ['a', 'b'] }, { app: 'a\u0000' }, { q: '\u0000' }]) {
        await expect(call('runs.list', ws, { query })).rejects.toMatchObject({ status: 400 });
      }
    });

    const ids = async (query: Record<string, unknown>) => (await all(ws, { ...query, limit: '200' })).sort();
    const expected = (pred: (r: Seed) => boolean) => seeded.filter(pred).map((r) => r.id).sort();

    it('filters on app, workflow, status (running matches waiting), runType, eventId, replayOf, since and until', async () => {
      expect(await ids({ app: 'mail' })).toEqual(expected((r) => r.app === 'mail'));
      expect(await ids({ status: 'running' })).toEqual(expected((r) => r.status === 'running' || r.status === 'waiting'));
      expect(await ids({ status: 'waiting' })).toEqual(expected((r) => r.status === 'waiting'));
      expect(await ids({ status: 'failed', app: 'billing' })).toEqual(expected((r) => r.status === 'failed' && r.app === 'billing'));
      expect(await ids({ runType: 'cron' })).toEqual(expected((r) => r.triggerKind === 'cron'));
      expect(await ids({ runType: 'event' })).toEqual(expected((r) => r.triggerKind === 'event'));
      expect(await ids({ eventId: 'evt_2' })).toEqual(expected((r) => r.eventId === 'evt_2'));
      expect(await ids({ replayOf: 'run_source' })).toEqual(expected((r) => r.replayOf === 'run_source'));
      expect(await ids({ since: '2024-03-01T00:00:10Z' })).toEqual(expected((r) => r.createdAtMs! >= t0 + 10_000));
      expect(await ids({ since: '2024-03-01T02:00:10+02:00' })).toEqual(expected((r) => r.createdAtMs! >= t0 + 10_000));
      expect(await ids({ until: '2024-03-01T00:00:10Z' })).toEqual(expected((r) => r.createdAtMs! < t0 + 10_000));
      const wf = seeded[4]!.workflow!;
      expect(await ids({ workflow: wf })).toEqual(expected((r) => r.workflow === wf));
      expect(await ids({ workflow: wf.slice(0, -1) })).toEqual([]);
    });

    it('matches q on workflow, id and app (case-insensitive, literal wildcards); deep widens it to input, result and error', async () => {
      // Literal, case-insensitive substring of workflow, id or app (run ids are random: one may hold 'a_1' too).
      const hits = (q: string) => expected((r) => [r.workflow, r.id, r.app].some((v) => (v ?? '').toLowerCase().includes(q.toLowerCase())));
      expect(await ids({ q: 'BETA' })).toEqual(hits('BETA'));
      expect(hits('BETA')).toEqual(expect.arrayContaining(expected((r) => r.workflow === 'Beta')));
      expect(await ids({ q: 'ILL' })).toEqual(hits('ILL'));
      expect(await ids({ q: '100%' })).toEqual(hits('100%'));
      expect(await ids({ q: 'a_1' })).toEqual(hits('a_1'));
      expect(await ids({ q: '%' })).toEqual(hits('%'));
      expect(hits('%')).toEqual(expected((r) => r.workflow === 'gamma_100%'));
      const one = seeded[42]!.id;
      expect(await ids({ q: one })).toEqual([one]);
      expect(await ids({ q: 'needle' })).toEqual([]);
      expect(await ids({ q: 'needle', deep: '1' })).toEqual([seeded[17]!.id, seeded[25]!.id, seeded[26]!.id].sort());
      expect(await ids({ q: 'needle', deep: '1', app: 'mail' })).toEqual([seeded[17]!.id, seeded[25]!.id].filter((id) => seeded.find((s) => s.id === id)!.app === 'mail').sort());
      // deep without q is ignored.
      expect(await ids({ deep: '1' })).toHaveLength(60);
    });

    it('reads one run with input, result and the fields a user needs', async () => {
      const s = seeded[25]!;
      const r = (await call('runs.get', ws, { params: { id: s.id } })).body as Record<string, unknown>;
      expect(r).toMatchObject({
        id: s.id,
        status: 'succeeded',
        workflow: s.workflow,
        app: s.app,
        triggerKind: 'cron',
        attempt: 1,
        input: { customer: 'c25' },
        result: { note: 'found the NEEDLE' },
        durationMs: s.durationMs,
        createdAt: new Date(s.createdAtMs!).toISOString(),
        startedAt: new Date(s.createdAtMs! + 5).toISOString(),
        endedAt: new Date(s.createdAtMs! + 5 + s.durationMs!).toISOString(),
      });
      expect(r.replayOf).toBeUndefined();
      expect(r.eventId).toBeUndefined();
      const byEvent = (await call('runs.get', ws, { params: { id: seeded[26]!.id } })).body as Record<string, unknown>;
      expect(byEvent).toMatchObject({ triggerKind: 'event', eventId: seeded[26]!.eventId, eventName: 'evt.name', error: { message: 'needle broke' } });
      const listed = (await list(ws, { q: s.id })).runs[0]!;
      expect(listed).not.toHaveProperty('input');
      expect(listed).not.toHaveProperty('result');
    });
  });

  it('pages through 1,000 runs while 200 more arrive: no duplicates, no gaps', async () => {
    const ws = uniqueName('ws_paging');
    const base = Date.now() - 1_000_000;
    // Some share a millisecond: the id breaks the tie.
    const original = await seedRuns(db, ws, Array.from({ length: 1000 }, (_, i) => ({ createdAtMs: base + Math.floor(i / 2) * 10, durationMs: i % 3 ? i : null })));
    for (const [sort, dir] of [['started', 'desc'], ['started', 'asc'], ['duration', 'desc'], ['app', 'asc']] as const) {
      const arrivals: Promise<unknown>[] = [];
      let arrived = 0;
      const seen: string[] = [];
      let cursor: string | undefined;
      for (;;) {
        const page = await list(ws, { sort, dir, limit: '37', ...(cursor ? { cursor } : {}) });
        seen.push(...page.runs.map((r) => r.id));
        // 200 more arrive while the client pages: 10 after each page, now-ish and a little in the past.
        if (arrived < 200) {
          arrivals.push(seedRuns(db, ws, Array.from({ length: 10 }, (_, i) => ({ createdAtMs: Date.now() - i, app: 'app', durationMs: i % 2 ? 3 : null }))));
          arrived += 10;
        }
        if (!page.next) break;
        cursor = page.next;
      }
      await Promise.all(arrivals);
      expect({ sort, dir, dupes: seen.length - new Set(seen).size }).toEqual({ sort, dir, dupes: 0 });
      const seenSet = new Set(seen);
      expect({ sort, dir, missing: original.filter((id) => !seenSet.has(id)).length }).toEqual({ sort, dir, missing: 0 });
    }
  }, 60_000);

  describe('stats, steps, logs, timeline and tenancy', () => {
    const ws = uniqueName('ws_a');
    const other = uniqueName('ws_b');
    let runId: string;
    let foreign: string;

    beforeAll(async () => {
      runId = (await seedRuns(db, ws, [{ app: 'a', status: 'running' }]))[0]!;
      foreign = (await seedRuns(db, other, [{ app: 'a', status: 'succeeded', durationMs: 5 }]))[0]!;
      await db.query(
        `insert into scheduler.steps (run_id, step_id, workspace_id, name, op, idx, status, data, attempts)
         values ($1, 's2', $2, 'second', 'StepRun', 1, 'succeeded', '2', 1), ($1, 's1', $2, 'first', 'StepRun', 0, 'succeeded', '{"a":1}', 2)`,
        [runId, ws],
      );
      const frames = [
        { seq: 1, kind: 'run_status', payload: { status: 'queued', attempt: 1 } },
        { seq: 2, kind: 'run_status', payload: { status: 'running', attempt: 1 } },
        { seq: 3, kind: 'log', payload: { level: 'info', message: 'hello', scope: '@root', attempt: 1 } },
        { seq: 4, kind: 'step_status', payload: { name: 'first', status: 'succeeded', attempt: 1, index: 0 } },
        { seq: 5, kind: 'log', payload: { level: 'warn', message: 'careful', fields: { n: 1 }, scope: 'second', attempt: 1 } },
        { seq: 6, kind: 'log', payload: { level: 'error', message: 'third', scope: 'second', attempt: 2 } },
      ];
      await db.query(
        `insert into scheduler.frames (run_id, seq, workspace_id, kind, payload)
         select $1, x.seq, $2, x.kind, x.payload from jsonb_to_recordset($3::jsonb) as x(seq int, kind text, payload jsonb)`,
        [runId, ws, JSON.stringify(frames)],
      );
    });

    it('computes stats with the successRate rules', async () => {
      const w = uniqueName('ws_stats');
      expect((await call('runs.stats', w)).body).toEqual({ total: 0, active: 0, succeeded: 0, failed: 0, successRate: 100 });
      await seedRuns(db, w, [
        { status: 'queued' }, { status: 'running' }, { status: 'waiting' }, { status: 'paused' },
        { status: 'succeeded', durationMs: 1 }, { status: 'succeeded', durationMs: 1 }, { status: 'failed', durationMs: 1 },
        { status: 'cancelled', durationMs: 1, app: 'other' }, { status: 'failed', durationMs: 1, app: 'other', createdAtMs: Date.parse('2020-01-01T00:00:00Z') },
      ]);
      expect((await call('runs.stats', w)).body).toEqual({ total: 9, active: 3, succeeded: 2, failed: 2, successRate: 50 });
      expect((await call('runs.stats', w, { query: { app: 'app' } })).body).toEqual({ total: 7, active: 3, succeeded: 2, failed: 1, successRate: 66 });
      expect((await call('runs.stats', w, { query: { since: '2021-01-01T00:00:00Z' } })).body).toMatchObject({ total: 8, failed: 1 });
      await expect(call('runs.stats', w, { query: { since: 'then' } })).rejects.toMatchObject({ status: 400 });
    });

    it('lists steps in order, logs with from/limit, and the timeline backlog', async () => {
      const steps = (await call('runs.steps', ws, { params: { id: runId } })).body as { name: string; attempts: number; output: unknown }[];
      expect(steps.map((s) => [s.name, s.attempts, s.output])).toEqual([['first', 2, { a: 1 }], ['second', 1, 2]]);
      const logs = (await call('runs.logs', ws, { params: { id: runId } })).body as { seq: number }[];
      expect(logs).toEqual([
        { seq: 3, ts: expect.any(String), level: 'info', message: 'hello', scope: '@root', attempt: 1 },
        { seq: 5, ts: expect.any(String), level: 'warn', message: 'careful', fields: { n: 1 }, scope: 'second', attempt: 1 },
        { seq: 6, ts: expect.any(String), level: 'error', message: 'third', scope: 'second', attempt: 2 },
      ]);
      expect(((await call('runs.logs', ws, { params: { id: runId }, query: { from: '3', limit: '1' } })).body as { seq: number }[]).map((l) => l.seq)).toEqual([5]);
      expect(((await call('runs.logs', ws, { params: { id: runId }, query: { limit: '99999' } })).body as unknown[]).length).toBe(3);
      await expect(call('runs.logs', ws, { params: { id: runId }, query: { from: '-1' } })).rejects.toMatchObject({ status: 400 });
      const tl = (await call('runs.timeline', ws, { params: { id: runId }, query: { from: '4' } })).body as { terminal: boolean; frames: { seq: number; kind: string; runId: string }[] };
      expect(tl.terminal).toBe(false);
      expect(tl.frames.map((f) => [f.seq, f.kind, f.runId])).toEqual([[5, 'log', runId], [6, 'log', runId]]);
    });

    it('reads another workspace run as 404 on every read', async () => {
      for (const op of ['runs.get', 'runs.steps', 'runs.logs', 'runs.timeline']) {
        await expect(call(op, ws, { params: { id: `${runId}\u0000` } })).rejects.toMatchObject({ status: 404, code: 'run_not_found' });
        await expect(call(op, ws, { params: { id: foreign } })).rejects.toMatchObject({ status: 404, code: 'run_not_found' });
        await expect(call(op, other, { params: { id: runId } })).rejects.toMatchObject({ status: 404, code: 'run_not_found' });
      }
      expect((await list(ws, {})).runs.map((r) => r.id)).toEqual([runId]);
      expect((await list(ws, { q: foreign })).runs).toEqual([]);
      expect((await call('runs.stats', other)).body).toMatchObject({ total: 1 });
    });
  });

  it('keeps every list query on an index (EXPLAIN with the recommended indexes)', async () => {
    const PER_WS = Number(process.env.RUNS_EXPLAIN_PER_WS ?? 8000);
    const ws = uniqueName('ws_explain');
    const others = Array.from({ length: 4 }, () => uniqueName('ws_noise'));
    // 40,000 runs across five workspaces by default; statistics make the planner behave as it would at scale.
    // RUNS_EXPLAIN_PER_WS=200000 runs it at 1,000,000 runs, with EXPLAIN ANALYZE timings.
    const statuses = ['succeeded', 'succeeded', 'succeeded', 'failed', 'running', 'waiting', 'queued', 'cancelled'];
    for (const w of [ws, ...others]) {
      await db.query(
        `insert into scheduler.runs (id, workspace_id, workflow, app, status, trigger_kind, event_id, replay_of, input, created_at, started_at, ended_at)
         select 'run_' || $1 || '_' || g, $1, 'wf' || (g % 50), 'app' || (g % 7), ($2::text[])[1 + g % 8], case when g % 9 = 0 then 'cron' else 'event' end,
                'evt_' || (g / 3), case when g % 97 = 0 then 'run_src' end, '{}', now() - g * interval '1 second',
                now() - g * interval '1 second', case when g % 8 in (0,1,2,3,7) then now() - g * interval '1 second' + (g % 1000) * interval '1 millisecond' end
           from generate_series(1, $3::int) g`,
        [w, statuses, PER_WS],
      );
    }
    for (const ddl of RECOMMENDED_INDEXES) await db.query(ddl);
    await db.query('analyze scheduler.runs');
    // The plan a service runs: prepared, so the generic one (GENERIC_PLANS in @dws/db).
    const plan = async (q: Partial<RunListQuery>) => {
      const { text, params } = listRunsSql(ws, { sort: 'started', dir: 'desc', limit: 31, ...q });
      return preparedPlan(db, text, params, PER_WS > 8000 ? '(analyze, buffers)' : '');
    };
    const after = { createdAt: '2030-01-01T00:00:00.000000Z', id: 'run_~' };
    const cases: [string, Partial<RunListQuery>][] = [
      ['default', {}],
      ['default, page 2', { after }],
      ['asc', { dir: 'asc' }],
      ['app', { app: 'app3' }],
      ['status', { status: 'failed' }],
      ['status=running (also waiting)', { status: 'running' }],
      ['runType', { runType: 'cron' }],
      ['q', { q: 'wf1' }],
      ['eventId', { eventId: 'evt_7' }],
      ['replayOf', { replayOf: 'run_src' }],
      ['since', { since: new Date(Date.now() - 60_000).toISOString() }],
      ['sort=workflow', { sort: 'workflow', dir: 'asc', after: { ...after, key: 'wf3' } }],
      ['sort=app', { sort: 'app' }],
      ['sort=status', { sort: 'status', after: { ...after, key: 'running' } }],
      ['sort=duration', { sort: 'duration', after: { ...after, key: 500 } }],
      ['sort=app with app', { sort: 'app', app: 'app2' }],
    ];
    const report: string[] = [];
    for (const [what, q] of cases) {
      const p = await plan(q);
      report.push(`-- ${what}\n${p}`);
      // No sequential scan, and no sort of the workspace: an index gives the rows in order. One event's
      // runs, or one run's replays, are a handful: sorting those after an index lookup is fine.
      expect({ what, seq: /Seq Scan/.test(p) }).toEqual({ what, seq: false });
      if (q.eventId || q.replayOf) continue;
      expect({ what, sort: /^\s*(->\s*)?Sort\b/m.test(p) && !/Incremental Sort/.test(p) }).toEqual({ what, sort: false });
    }
    if (PER_WS > 8000) {
      const t = Date.now();
      await call('runs.stats', ws);
      console.log(`runs.stats over ${PER_WS} runs of one workspace: ${Date.now() - t} ms`);
    }
    console.log(`EXPLAIN of GET /runs (${PER_WS * 5} runs, 5 workspaces):\n${report.join('\n')}`);
  }, 1_200_000);
});

/**
 * The indexes the read side needs (the lead adds them to scheduler/schema.ts);
 * created here so the plans above are the plans production gets. Names match
 * the drizzle declarations handed over in the report.
 */
export const RECOMMENDED_INDEXES = [
  `create index if not exists runs_ws_app_created on scheduler.runs (workspace_id, app desc nulls last, created_at desc nulls last, id desc nulls last)`,
  `create index if not exists runs_ws_status_created on scheduler.runs (workspace_id, status desc nulls last, created_at desc nulls last, id desc nulls last)`,
  `create index if not exists runs_ws_workflow_created on scheduler.runs (workspace_id, workflow desc nulls last, created_at desc nulls last, id desc nulls last)`,
  `create index if not exists runs_ws_duration on scheduler.runs (workspace_id, (coalesce((extract(epoch from (ended_at - started_at)) * 1000)::bigint, -1)) desc nulls last, created_at desc nulls last, id desc nulls last)`,
  `create index if not exists runs_ws_replay_of on scheduler.runs (workspace_id, replay_of)`,
];
