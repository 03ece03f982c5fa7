import type { Database } from '@dws/db';
import type { EventVars } from '@dws/cel';
import type { GateScope } from './gates.js';

/** An event as a buffer keeps it: data stays raw JSON text. */
export interface BufferedEvent {
  id: string;
  name: string;
  dataJson: string;
  tsMs: number;
  runner: string;
  /** The event's session, which the run it starts joins (a debounced run the last event's, a batched run the first's). */
  session?: string;
  /** The event's tags, the run's (a debounced run takes the last event's, a batched run all of its events'). */
  tags?: string[];
}

/**
 * Coalesce an event into the debounce buffer of its key (the last event
 * wins): the run fires `periodMs` after this event, but no later than
 * `timeoutMs` after the first. The buffer's run id is drawn by the first
 * event and answered to every event it absorbs.
 */
export async function debounceEvent(
  tx: Database,
  s: GateScope,
  ev: BufferedEvent,
  opts: { runId: string; periodMs: number; timeoutMs?: number },
): Promise<string> {
  const rows = await tx.query<{ run_id: string }>(
    `insert into ingest.debounces as d (workspace_id, app, workflow, key, run_id, event_id, event_name, data, runner, due_at, deadline_at, session, tags)
     values ($1, $2, $3, $4, $5, $6, $7, $8, $9, now() + $10::bigint * interval '1 millisecond',
             case when $11::bigint is null then null else now() + $11::bigint * interval '1 millisecond' end, $12, $13::text[])
     on conflict (workspace_id, app, workflow, key) do update
       set event_id = excluded.event_id, event_name = excluded.event_name, data = excluded.data, runner = excluded.runner,
           session = excluded.session, tags = excluded.tags,
           due_at = least(excluded.due_at, coalesce(d.deadline_at, excluded.due_at))
     returning run_id`,
    [s.workspaceId, s.app, s.workflow, s.key, opts.runId, ev.id, ev.name, ev.dataJson, ev.runner, opts.periodMs, opts.timeoutMs ?? null, ev.session ?? null, ev.tags ?? null],
  );
  return rows[0]!.run_id;
}

export interface DueDebounce {
  workspace_id: string;
  app: string;
  workflow: string;
  key: string;
  run_id: string;
  event_id: string;
  event_name: string;
  data: string;
  runner: string;
  session: string | null;
  tags: string[] | null;
}

/** Take due debounce buffers (SKIP LOCKED: a replica takes each once; one an event is updating is left for the next poll). */
export function takeDueDebounces(tx: Database, limit: number): Promise<DueDebounce[]> {
  return tx.query<DueDebounce>(
    `delete from ingest.debounces d using (
        select workspace_id, app, workflow, key from ingest.debounces where due_at <= now()
         order by due_at limit $1 for update skip locked) due
      where d.workspace_id = due.workspace_id and d.app = due.app and d.workflow = due.workflow and d.key = due.key
      returning d.workspace_id, d.app, d.workflow, d.key, d.run_id, d.event_id, d.event_name, d.data, d.runner, d.session, d.tags`,
    [limit],
  );
}

/**
 * Add an event to the open batch of its key (opening one, due `timeoutMs`
 * from now, if there is none).
 * @returns the batch's run id and its size and bytes after this event
 */
export async function batchEvent(
  tx: Database,
  s: GateScope,
  ev: BufferedEvent,
  opts: { runId: string; timeoutMs: number },
): Promise<{ runId: string; size: number; bytes: number }> {
  const rows = await tx.query<{ run_id: string; size: number; bytes: number }>(
    `insert into ingest.batches as b (workspace_id, app, workflow, key, run_id, size, bytes, runner, due_at)
     values ($1, $2, $3, $4, $5, 1, $6, $7, now() + $8::bigint * interval '1 millisecond')
     on conflict (workspace_id, app, workflow, key) do update set size = b.size + 1, bytes = b.bytes + excluded.bytes
     returning run_id, size, bytes`,
    [s.workspaceId, s.app, s.workflow, s.key, opts.runId, ev.dataJson.length, ev.runner, opts.timeoutMs],
  );
  const b = rows[0]!;
  await tx.query('insert into ingest.batch_events (run_id, seq, event_id, name, data, ts_ms, session, tags) values ($1, $2, $3, $4, $5, $6, $7, $8::text[])', [
    b.run_id, b.size, ev.id, ev.name, ev.dataJson, ev.tsMs, ev.session ?? null, ev.tags ?? null,
  ]);
  return { runId: b.run_id, size: Number(b.size), bytes: Number(b.bytes) };
}

export interface ClosedBatch {
  workspace_id: string;
  app: string;
  workflow: string;
  run_id: string;
  runner: string;
  events: { seq: number; event_id: string; name: string; data: string; ts_ms: string | number; session: string | null; tags: string[] | null }[];
}

/** Close a batch (full, or due): remove it and its events, returning them oldest first. */
export async function closeBatch(tx: Database, runId: string): Promise<ClosedBatch | undefined> {
  const rows = await tx.query<Omit<ClosedBatch, 'events'>>(
    'delete from ingest.batches where run_id = $1 returning workspace_id, app, workflow, run_id, runner',
    [runId],
  );
  const b = rows[0];
  if (!b) return undefined;
  const events = await tx.query<ClosedBatch['events'][number]>(
    'delete from ingest.batch_events where run_id = $1 returning seq, event_id, name, data, ts_ms, session, tags',
    [runId],
  );
  // delete ... returning has no order; seq is the order the batch row's lock let them in.
  events.sort((a, b2) => Number(a.seq) - Number(b2.seq));
  return { ...b, events };
}

/** Batches past their timeout, locked for this transaction (SKIP LOCKED). */
export function dueBatches(tx: Database, limit: number): Promise<{ run_id: string; workspace_id: string; app: string; workflow: string }[]> {
  return tx.query(
    'select run_id, workspace_id, app, workflow from ingest.batches where due_at <= now() order by due_at limit $1 for update skip locked',
    [limit],
  );
}

/** The vars of a batch's first event (its keys are evaluated over it). */
export async function firstBatchEvent(tx: Database, runId: string): Promise<EventVars | undefined> {
  const rows = await tx.query<{ event_id: string; name: string; data: string; ts_ms: string | number }>(
    'select event_id, name, data, ts_ms from ingest.batch_events where run_id = $1 order by seq limit 1',
    [runId],
  );
  const e = rows[0];
  return e && { event: { id: e.event_id, name: e.name, data: JSON.parse(e.data) as unknown, ts: Number(e.ts_ms) } };
}
