import type { Database } from '@dws/db';
import { slotFields, type SlotRequest } from '../domain/slot-fields.js';
import { ACTIVE_SQL as ACTIVE, type NewFrame, type NewRun } from './runs.js';

/** A run's flow control as StartRun carries it: its slots (slot-fields.ts), throttle time and singleton key. */
export interface FlowControl extends SlotRequest {
  /** Throttle: not before this epoch ms (0: at once). */
  notBeforeMs: number;
  priority: number;
  singletonKey: string | null;
}

/** A new run's first frame (seq 1), stored with its row and published once committed. */
export const queuedFrame = (): NewFrame => ({ seq: 1, kind: 'run_status', fields: { status: 'queued', attempt: 1 }, ts: new Date().toISOString() });

/**
 * A run under flow control starts queued: due at once (or at its throttle
 * time) when it has no concurrency limit, else held back until a slot of its
 * key admits it, not before its throttle time either. Idempotent on the run
 * id: returns its queued frame (to go live once committed), or nothing when
 * the id existed.
 */
export async function insertFlowRun(tx: Database, run: NewRun, flow: FlowControl): Promise<NewFrame | undefined> {
  const queued = queuedFrame();
  const s = slotFields(flow);
  const rows = await tx.query<{ id: string }>(
    `with r as (
       insert into scheduler.runs (id, workspace_id, workflow, app, runner, status, trigger_kind, event_id, event_name, replay_of, input,
                                   next_seq, lease_until, created_at, started_at, concurrency_key, concurrency_limit, admitted, priority, singleton_key, session,
                                   timeout_start_ms, timeout_finish_ms, concurrency_key_2, concurrency_limit_2, concurrency_shared_2, holds_slots, tags)
       values ($1, $2, $3, $4, $5, 'queued', $6, $7, $8, $9, $10, 2,
               greatest(now(), to_timestamp($11::bigint / 1000.0)),
               to_timestamp($12::bigint / 1000.0), now(), $14, $15, not $13::boolean, $16, $17, $18, $21, $22, $23, $24, $25, $26, $27::text[])
       on conflict (id) do nothing
       returning id
     )
     insert into scheduler.frames (run_id, seq, workspace_id, kind, payload, ts)
     select r.id, 1, $2, 'run_status', $19::jsonb, $20::timestamptz from r
     returning run_id`,
    [
      run.id, run.workspaceId, run.workflow, run.app, run.runner, run.triggerKind, run.eventId, run.eventName, run.replayOf, run.inputJson,
      flow.notBeforeMs, run.createdAtMs, s.concurrencyLimit > 0, s.concurrencyKey, s.concurrencyLimit, s.priority, flow.singletonKey,
      run.session ?? null, JSON.stringify(queued.fields), queued.ts, run.timeoutStartMs ?? null, run.timeoutFinishMs ?? null,
      s.concurrencyKey2, s.concurrencyLimit2, s.concurrencyShared2, s.holdsSlots, run.tags ?? null,
    ],
  );
  return rows.length === 1 ? queued : undefined;
}

/**
 * The runs that wait for a slot: queued and not yet admitted (QUEUED, the
 * runs_awaiting_slot indexes' predicate; QUEUED_DUE once its throttle time,
 * kept in lease_until, has come: null before the column held it), or parked
 * since (a sleep, a wait, a backoff, a pause gave the slot back) and due.
 */
const QUEUED = `status = 'queued' and not admitted`;
const QUEUED_DUE = `${QUEUED} and (lease_until is null or lease_until <= now())`;
const RELEASED_DUE = `status = 'waiting' and not admitted and lease_until <= now()`;
/** Admission order within a key; the runs_awaiting_slot indexes hold it, so the first N are read, not sorted. */
const ORDER = 'priority desc nulls last, created_at, id';
/** A key's runs, with the key as $1-$4. */
const OF_KEY = 'workspace_id = $1 and app = $2 and workflow = $3 and concurrency_key = $4';

/** A key's first $5 runs in line, unsorted (`c`): one range of runs_awaiting_slot, and the few released runs due. */
const IN_LINE = `c as (
  (select id, priority, created_at from scheduler.runs where ${OF_KEY} and ${QUEUED_DUE} order by ${ORDER} limit $5)
  union all
  (select id, priority, created_at from scheduler.runs where ${OF_KEY} and ${RELEASED_DUE})
)`;

/** Concurrency keys served per round (the first in line of each, oldest first). */
const ADMIT_KEYS = 100;
/** Waiting runs read past a key's free slots when some need a second key's slot too (those blocked there are passed over). */
const SECOND_KEY_LOOKAHEAD = 100;

export interface SlotKey {
  workspace_id: string;
  app: string;
  workflow: string;
  concurrency_key: string;
  concurrency_limit: number;
  /** Some waiting run of the key has a second constraint. */
  second: boolean;
}

/**
 * Admit waiting runs into free concurrency slots. A run holds its key's slot
 * (and its second key's, with two constraints) while it executes: from
 * admission until it ends or parks. A park (a sleep, a wait for an event,
 * an approval or a child, a backoff, a pause; not a model call the service
 * makes for the run, which is work) gives the slots back (unless the run
 * holds them to its end: a queued singleton), as
 * Inngest's step concurrency does, and the run, once due again, waits here
 * for them like a new one. The keys with a free slot are served, the one
 * whose first run in line is oldest first, and each key's check-and-admit
 * runs under an advisory lock (and its waiting runs' second keys' locks), so
 * replicas never admit past a limit together. Within a key: higher priority
 * first, then creation order (a woken run is older than the runs queued
 * behind it); a run whose second key is full is passed over.
 */
export async function admitToSlots(db: Database): Promise<number> {
  const keys = await db.query<SlotKey>(KEYS_WITH_ROOM, [ADMIT_KEYS]);
  let admitted = 0;
  for (const k of keys) admitted += await admitKey(db, k);
  return admitted;
}

/** The columns that name a key's slots, for a run `r` (SQL). */
const keyOf = (r: string, k: string) =>
  `${r}.workspace_id = ${k}.workspace_id and ${r}.app = ${k}.app and ${r}.workflow = ${k}.workflow and ${r}.concurrency_key = ${k}.concurrency_key`;

/**
 * The keys with runs waiting for a slot and a free slot now, in the order
 * of the first run in line of each (oldest first). Asked every round while
 * runs wait (and before each claim), so it costs a few index probes per key,
 * never a scan of the waiting runs: 100,000 runs queued behind one key took
 * 50 ms of Postgres a round grouped. The queued runs' keys are walked on
 * runs_awaiting_slot (a skip scan: each next key is one probe past the
 * last); the released runs due now are few. A key's limit is the larger of
 * its first and last queued runs' (a limit changed meanwhile), `second`
 * whether any waiting run has a second constraint. A full key is left out:
 * a hundred busy keys do not hold back a key with room. The limit is a
 * parameter: a statement without one goes as a simple query, planned at
 * every poll.
 */
const KEYS_WITH_ROOM = `
  with recursive queued as (
    (select workspace_id, app, workflow, concurrency_key from scheduler.runs
      where ${QUEUED} order by workspace_id, app, workflow, concurrency_key limit 1)
    union all
    (select n.* from queued q, lateral (
       select workspace_id, app, workflow, concurrency_key from scheduler.runs
        where ${QUEUED} and (workspace_id, app, workflow, concurrency_key) > (q.workspace_id, q.app, q.workflow, q.concurrency_key)
        order by workspace_id, app, workflow, concurrency_key limit 1) n)
  ), released as (
    select workspace_id, app, workflow, concurrency_key, concurrency_limit, concurrency_limit_2, priority, created_at, id from scheduler.runs
     where ${RELEASED_DUE}
  ), waiting as (
    select workspace_id, app, workflow, concurrency_key from queued
    union
    select workspace_id, app, workflow, concurrency_key from released
  )
  select k.workspace_id, k.app, k.workflow, k.concurrency_key, greatest(first.concurrency_limit, last.concurrency_limit) as concurrency_limit,
         exists (select 1 from scheduler.runs r where r.${QUEUED} and r.concurrency_limit_2 > 0 and ${keyOf('r', 'k')})
           or exists (select 1 from released r where r.concurrency_limit_2 > 0 and ${keyOf('r', 'k')}) as second
    from waiting k
    cross join lateral (
      select created_at, concurrency_limit from (
        (select priority, created_at, id, concurrency_limit from scheduler.runs r where r.${QUEUED_DUE} and ${keyOf('r', 'k')} order by ${ORDER} limit 1)
        union all
        (select priority, created_at, id, concurrency_limit from released r where ${keyOf('r', 'k')} order by ${ORDER} limit 1)
      ) o order by ${ORDER} limit 1
    ) first
    cross join lateral (
      select coalesce((select concurrency_limit from scheduler.runs r where r.${QUEUED} and ${keyOf('r', 'k')}
                        order by priority nulls first, created_at desc, id desc limit 1), 0) as concurrency_limit
    ) last
   where (select count(*) from scheduler.runs h
           where ${keyOf('h', 'k')} and h.concurrency_limit > 0 and h.admitted and h.status in ${ACTIVE}) < greatest(first.concurrency_limit, last.concurrency_limit)
   order by first.created_at
   limit $1`;

/** One key's check-and-admit, under its lock: how many of its waiting runs it admitted. */
export function admitKey(db: Database, k: SlotKey): Promise<number> {
  return db.tx(async (tx) => {
    await tx.query('select pg_advisory_xact_lock(hashtext($1))', [`slots:${k.workspace_id}:${k.app}:${k.workflow}:${k.concurrency_key}`]);
    const held = await tx.query<{ n: number }>(
      `select count(*)::int as n from scheduler.runs
        where workspace_id = $1 and app = $2 and workflow = $3 and concurrency_key = $4
          and concurrency_limit > 0 and admitted and status in ${ACTIVE}`,
      [k.workspace_id, k.app, k.workflow, k.concurrency_key],
    );
    const free = Number(k.concurrency_limit) - Number(held[0]?.n ?? 0);
    if (free <= 0) return 0;
    if (!k.second) {
      // The first `free` in line: read off the index (queued) or the few due (released), not sorted.
      const rows = await tx.query(
        `with ${IN_LINE}, picked as (
           select id from scheduler.runs where id in (select id from c order by ${ORDER} limit $5) and not admitted and status in ('queued', 'waiting')
              for update skip locked
         )
         update scheduler.runs set admitted = true, lease_until = now(), updated_at = now()
          where id in (select id from picked)
          returning id`,
        [k.workspace_id, k.app, k.workflow, k.concurrency_key, free],
      );
      return rows.length;
    }
    const ids = await admittableWithSecondKeys(tx, k, free);
    if (ids.length === 0) return 0;
    await tx.query('update scheduler.runs set admitted = true, lease_until = now(), updated_at = now() where id = any($1::text[])', [ids]);
    return ids.length;
  });
}

/** A key's first runs in line (`c`: id, priority, created_at), locked: the candidates admission picks from. */
const candidates = (c: string) => `with ${c}
  select id, concurrency_key_2 as key2, concurrency_limit_2 as limit2, concurrency_shared_2 as shared from scheduler.runs
   where id in (select id from c order by ${ORDER} limit $5) and not admitted and status in ('queued', 'waiting')
   order by ${ORDER}
   for update skip locked`;

const FIRST_IN_LINE = candidates(IN_LINE);

/** Not a run of the second keys found full ($6: a workflow's own, $7: shared ones). */
const PAST_FULL = `not (concurrency_limit_2 > 0 and ((not concurrency_shared_2 and concurrency_key_2 = any($6::text[])) or (concurrency_shared_2 and concurrency_key_2 = any($7::text[]))))`;

/**
 * The first $5 in line past the runs of second keys found full: the same
 * index range read on, those runs passed over as it goes (behind 10,000 runs
 * of one full user: a scan of them, not a probe of every other user).
 */
const FIRST_IN_LINE_PAST_FULL = candidates(`c as (
  (select id, priority, created_at from scheduler.runs where ${OF_KEY} and ${QUEUED_DUE} and ${PAST_FULL} order by ${ORDER} limit $5)
  union all
  (select id, priority, created_at from scheduler.runs where ${OF_KEY} and ${RELEASED_DUE} and ${PAST_FULL})
)`);

/**
 * The first $5 in line of a key among the second keys with room, counting
 * at most limit2 runs of each: the second keys walked on
 * runs_awaiting_slot_2 (a skip scan), the full ones left out (their holders
 * counted on the holders' indexes: without that, more full keys ahead than
 * $5 would fill the read every round and a key with room behind them would
 * never be admitted), each other one's first limit2 read off it. A few
 * probes a second key, so it is the last resort, for a head of the line
 * made of runs of many full keys.
 */
const FIRST_IN_LINE_PER_SECOND_KEY = candidates(`recursive groups as (
  (select concurrency_shared_2 as shared, concurrency_key_2 as key2, concurrency_limit_2 as limit2 from scheduler.runs
    where ${OF_KEY} and ${QUEUED} and concurrency_limit_2 > 0 order by concurrency_shared_2, concurrency_key_2, ${ORDER} limit 1)
  union all
  (select n.* from groups g, lateral (
     select concurrency_shared_2, concurrency_key_2, concurrency_limit_2 from scheduler.runs
      where ${OF_KEY} and ${QUEUED} and concurrency_limit_2 > 0 and (concurrency_shared_2, concurrency_key_2) > (g.shared, g.key2)
      order by concurrency_shared_2, concurrency_key_2, ${ORDER} limit 1) n)
), open as (
  select g.* from groups g
   where case when g.shared
           then (select count(*) from scheduler.runs h where h.workspace_id = $1 and h.concurrency_shared_2 and h.concurrency_key_2 = g.key2
                    and h.concurrency_limit_2 > 0 and h.admitted and h.status in ${ACTIVE})
           else (select count(*) from scheduler.runs h where h.workspace_id = $1 and h.app = $2 and h.workflow = $3 and h.concurrency_key_2 = g.key2
                    and not h.concurrency_shared_2 and h.concurrency_limit_2 > 0 and h.admitted and h.status in ${ACTIVE})
         end < g.limit2
), c as (
  select x.* from open g, lateral (
    select id, priority, created_at from scheduler.runs
     where ${OF_KEY} and ${QUEUED_DUE} and concurrency_limit_2 > 0 and concurrency_shared_2 = g.shared and concurrency_key_2 = g.key2
     order by ${ORDER} limit g.limit2) x
  union all
  (select id, priority, created_at from scheduler.runs where ${OF_KEY} and ${QUEUED_DUE} and concurrency_limit_2 = 0 order by ${ORDER} limit $5)
  union all
  (select id, priority, created_at from scheduler.runs where ${OF_KEY} and ${RELEASED_DUE})
)`);

interface InLine {
  id: string;
  key2: string | null;
  limit2: number;
  shared: boolean;
}

/**
 * Up to `free` waiting runs of a key, in admission order, whose second key
 * (if they have one) has a free slot too; each second key's lock taken, in
 * one order for every admission, before its holders are counted. A shared
 * second key (scope env) is locked and counted across the workspace's
 * workflows, a workflow's own within it. The first `free` + look-ahead in
 * line are read first (one index range, whatever the number of second
 * keys). When too few of those have room (the head of the line is runs of
 * full second keys), the line is read again past the runs of the keys found
 * full (one user's flood: a scan of its runs, 8 ms behind 10,000 of them);
 * when that still finds too few (more full keys than a read holds), each
 * second key with room's first in line is read instead.
 */
async function admittableWithSecondKeys(tx: Database, k: SlotKey, free: number): Promise<string[]> {
  const params = [k.workspace_id, k.app, k.workflow, k.concurrency_key, free + SECOND_KEY_LOOKAHEAD];
  let waiting = await tx.query<InLine>(FIRST_IN_LINE, params);
  // Unlocked, the holders only say which read to use; they are counted again under the locks.
  const tooFew = async () => {
    if (waiting.length < free + SECOND_KEY_LOOKAHEAD) return undefined;
    const holding = await secondKeyHolders(tx, k, waiting);
    return withRoom(k, waiting, holding, free).length < free ? holding : undefined;
  };
  const holding = await tooFew();
  if (holding) {
    const full = waiting.filter((w) => w.limit2 > 0 && (holding.get(secondSlot(k, w)) ?? 0) >= w.limit2);
    const keysOf = (shared: boolean) => [...new Set(full.filter((w) => w.shared === shared).map((w) => w.key2 ?? ''))];
    waiting = await tx.query<InLine>(FIRST_IN_LINE_PAST_FULL, [...params, keysOf(false), keysOf(true)]);
    if (await tooFew()) waiting = await tx.query<InLine>(FIRST_IN_LINE_PER_SECOND_KEY, params);
  }
  // In one order for every admission, in one round trip (a round trip a lock cost 30 ms for 100 second keys).
  const slots = [...new Set(waiting.filter((w) => w.limit2 > 0).map((w) => secondSlot(k, w)))].sort();
  if (slots.length > 0) await tx.query('select pg_advisory_xact_lock(hashtext(s)) from unnest($1::text[]) as s', [slots]);
  return withRoom(k, waiting, await secondKeyHolders(tx, k, waiting), free);
}

const secondSlot = (k: SlotKey, w: { key2: string | null; shared: boolean }) =>
  w.shared ? `slots2:${k.workspace_id}::${w.key2 ?? ''}` : `slots2:${k.workspace_id}:${k.app}:${k.workflow}:${w.key2 ?? ''}`;

/** How many runs hold each second key's slot (by `secondSlot`) of the waiting runs' second keys. */
async function secondKeyHolders(tx: Database, k: SlotKey, waiting: InLine[]): Promise<Map<string, number>> {
  const limited = waiting.filter((w) => w.limit2 > 0);
  const own = [...new Set(limited.filter((w) => !w.shared).map((w) => w.key2 ?? ''))];
  const shared = [...new Set(limited.filter((w) => w.shared).map((w) => w.key2 ?? ''))];
  if (own.length + shared.length === 0) return new Map();
  const held = await tx.query<{ key2: string; shared: boolean; n: number }>(
    `select concurrency_key_2 as key2, concurrency_shared_2 as shared, count(*)::int as n from scheduler.runs
      where workspace_id = $1 and concurrency_limit_2 > 0 and admitted and status in ${ACTIVE}
        and ((not concurrency_shared_2 and app = $2 and workflow = $3 and concurrency_key_2 = any($4::text[]))
          or (concurrency_shared_2 and concurrency_key_2 = any($5::text[])))
      group by concurrency_key_2, concurrency_shared_2`,
    [k.workspace_id, k.app, k.workflow, own, shared],
  );
  return new Map(held.map((h) => [secondSlot(k, { key2: h.key2, shared: h.shared }), Number(h.n)]));
}

/** The first `free` of the waiting runs, in their order, whose second key has room given `holding` (and the runs picked before). */
function withRoom(k: SlotKey, waiting: InLine[], holding: Map<string, number>, free: number): string[] {
  const taken = new Map(holding);
  const ids: string[] = [];
  for (const w of waiting) {
    if (ids.length >= free) break;
    if (w.limit2 > 0) {
      const slot = secondSlot(k, w);
      const n = taken.get(slot) ?? 0;
      if (n >= w.limit2) continue;
      taken.set(slot, n + 1);
    }
    ids.push(w.id);
  }
  return ids;
}

/** Whether the run holds a slot of this first key to its end (a queued singleton). */
export async function holdsKey(db: Database, runId: string, key: string | null): Promise<boolean> {
  const rows = await db.query('select 1 from scheduler.runs where id = $1 and holds_slots and concurrency_key = $2', [runId, key]);
  return rows.length > 0;
}

/** Non-terminal runs of a singleton key (the run being started excluded), locked for the caller's transaction. */
export async function activeSingletons(tx: Database, r: { workspaceId: string; app: string; workflow: string; key: string; except?: string }): Promise<string[]> {
  await tx.query('select pg_advisory_xact_lock(hashtext($1))', [`singleton:${r.workspaceId}:${r.app}:${r.workflow}:${r.key}`]);
  const rows = await tx.query<{ id: string }>(
    `select id from scheduler.runs
      where workspace_id = $1 and app = $2 and workflow = $3 and singleton_key = $4 and id <> $5
        and status in ('queued', 'running', 'waiting', 'paused')`,
    [r.workspaceId, r.app, r.workflow, r.key, r.except ?? ''],
  );
  return rows.map((x) => x.id);
}

/**
 * The singleton mode a run of the workflow is started with now, from its
 * registered config (`skip` when the config names none); undefined without
 * a singleton.
 */
export async function singletonModeOf(db: Database, r: { workspaceId: string; app: string; workflow: string }): Promise<'skip' | 'cancel' | 'queue' | undefined> {
  const rows = await db.query<{ mode: 'skip' | 'cancel' | 'queue' | null }>(
    `select coalesce(config->'singleton'->>'mode', 'skip') as mode from scheduler.workflows
      where workspace_id = $1 and app = $2 and name = $3 and jsonb_typeof(config->'singleton') = 'object'`,
    [r.workspaceId, r.app, r.workflow],
  );
  return rows[0]?.mode ?? undefined;
}

/** runs.activeForKey: the active runs of a singleton key, and which of the given ids have finished. */
export async function singletonState(db: Database, r: { workspaceId: string; app: string; workflow: string; key: string; runIds: string[] }) {
  const active = await db.query<{ id: string }>(
    `select id from scheduler.runs where workspace_id = $1 and app = $2 and workflow = $3 and singleton_key = $4
        and status in ('queued', 'running', 'waiting', 'paused')`,
    [r.workspaceId, r.app, r.workflow, r.key],
  );
  const finished = r.runIds.length
    ? await db.query<{ id: string }>(
        `select id from scheduler.runs where workspace_id = $1 and id = any($2::text[]) and status in ('succeeded', 'failed', 'cancelled')`,
        [r.workspaceId, r.runIds],
      )
    : [];
  return { active: active.map((x) => x.id), finished: finished.map((x) => x.id) };
}
