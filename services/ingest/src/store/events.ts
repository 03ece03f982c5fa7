import type { Database } from '@dws/db';

export interface EventRow {
  id: string;
  name: string;
  app: string | null;
  source: string;
  data: string;
  woke: number;
  triggered: { workflow: string; app: string; runId: string }[];
  tags: string[] | null;
  scheduled_for: Date | string | null;
  received_at: Date | string;
}

export interface NewEvent {
  id: string;
  workspaceId: string;
  name: string;
  app?: string;
  source: string;
  /** Raw JSON text of the payload. */
  dataJson: string;
  dedupeId?: string;
  runner?: string;
  targetApp?: string;
  tags?: string[];
  /** A delayed event's due time. */
  scheduledForMs?: number;
}

/**
 * Insert events in one statement (their `triggered` and `woke` are set by
 * setOutcomes once admission decided and the wake answered). Rows travel as one jsonb parameter (postgres.js mangles null
 * inside array parameters); data stays the text it came in as.
 * @returns the ids inserted: an id already there (a redelivered emit) is not
 */
export async function insertEvents(tx: Database, events: NewEvent[]): Promise<Set<string>> {
  if (events.length === 0) return new Set();
  const rows = await tx.query<{ id: string }>(
    `insert into ingest.events (id, workspace_id, name, app, source, data, dedupe_id, runner, target_app, tags, scheduled_for, triggered, woke)
     select e.id, e.workspace_id, e.name, e.app, e.source, e.data, e.dedupe_id, e.runner, e.target_app, e.tags,
            to_timestamp(e.scheduled_for_ms / 1000.0), '[]'::jsonb, 0
       from jsonb_to_recordset($1::jsonb) as e(${EVENT_COLUMNS})
     on conflict (id) do nothing returning id`,
    [eventRowsJson(events)],
  );
  return new Set(rows.map((r) => r.id));
}

/** The columns of an event row as it travels in a jsonb parameter (see eventRowsJson). */
const EVENT_COLUMNS =
  'id text, workspace_id text, name text, app text, source text, data text, dedupe_id text, runner text, target_app text, tags text[], scheduled_for_ms bigint';

function eventRowsJson(events: (NewEvent & { triggered?: unknown[]; ixVersion?: number })[]): string {
  return `[${events
    .map((e) =>
      JSON.stringify({
        id: e.id, workspace_id: e.workspaceId, name: e.name, app: e.app ?? null, source: e.source, data: e.dataJson, dedupe_id: e.dedupeId ?? null,
        runner: e.runner ?? null, target_app: e.targetApp ?? null, tags: e.tags ?? null, scheduled_for_ms: e.scheduledForMs ?? null, triggered: e.triggered ?? [],
        ix_version: e.ixVersion ?? null,
      }),
    )
    .join(',')}]`;
}

/** An outbox message that is written only if its event is (not for a redelivered emit's id). */
export interface EventOutboxRow {
  eventId: string;
  subject: string;
  msgId: string;
  payload: Uint8Array;
}

/**
 * The whole record of events that pass no gate (no dedupe id, no flow
 * control): the rows with the runs they started and the outbox rows of those
 * runs (`woke` is written by setOutcomes once the wake answered, if any),
 * in ONE statement, so an ordinary event costs one round trip and no
 * transaction. An event matched against its workspace's index as cached
 * (`ixVersion`, not read for it) is checked here: where the index has moved
 * (a registration or a suspension committed before this statement), the
 * event writes nothing and comes back `stale`, to be matched again. An id
 * already there (a redelivered emit) writes nothing, outbox rows included.
 * @returns the ids inserted, the stale ones, and the outbox row id of each msgId written
 */
export async function recordEvents(
  db: Database,
  events: (NewEvent & { triggered: unknown[]; ixVersion?: number })[],
  outbox: EventOutboxRow[],
): Promise<{ inserted: Set<string>; stale: Set<string>; outboxIds: Map<string, number> }> {
  if (events.length === 0) return { inserted: new Set(), stale: new Set(), outboxIds: new Map() };
  const rows = await db.query<{ inserted: string[] | null; stale: string[] | null; outbox: [number, string][] | null }>(
    `with given as (
       select * from jsonb_to_recordset($1::jsonb) as g(${EVENT_COLUMNS}, triggered jsonb, ix_version bigint)
     ), valid as (
       select g.* from given g
        where g.ix_version is null or g.ix_version = coalesce((select v.version from ingest.index_versions v where v.workspace_id = g.workspace_id), 0)
     ), e as (
       insert into ingest.events (id, workspace_id, name, app, source, data, dedupe_id, runner, target_app, tags, triggered, woke)
       select c.id, c.workspace_id, c.name, c.app, c.source, c.data, c.dedupe_id, c.runner, c.target_app, c.tags, c.triggered, 0
         from valid c
       on conflict (id) do nothing returning id
     ), o as (
       insert into ingest.outbox (subject, msg_id, payload)
       select x.subject, x.msg_id, decode(x.payload, 'base64')
         from jsonb_to_recordset($2::jsonb) as x(event_id text, subject text, msg_id text, payload text) join e on e.id = x.event_id
       returning id, msg_id
     )
     select (select array_agg(id) from e) as inserted,
            (select array_agg(g.id) from given g where not exists (select 1 from valid c where c.id = g.id)) as stale,
            (select json_agg(json_build_array(id, msg_id)) from o) as outbox`,
    [
      eventRowsJson(events),
      JSON.stringify(outbox.map((m) => ({ event_id: m.eventId, subject: m.subject, msg_id: m.msgId, payload: Buffer.from(m.payload).toString('base64') }))),
    ],
  );
  const row = rows[0];
  return {
    inserted: new Set(row?.inserted ?? []),
    stale: new Set(row?.stale ?? []),
    outboxIds: new Map((row?.outbox ?? []).map(([id, msgId]) => [msgId, Number(id)])),
  };
}

/** The runs events produced or joined and the waiters they woke (same transaction as the rows). */
export async function setOutcomes(tx: Database, entries: { id: string; triggered: unknown[]; woke: number }[]): Promise<void> {
  if (entries.length === 0) return;
  await tx.query(
    `update ingest.events e set triggered = t.triggered, woke = t.woke
       from jsonb_to_recordset($1::jsonb) as t(id text, triggered jsonb, woke int) where e.id = t.id`,
    [JSON.stringify(entries)],
  );
}

/**
 * SPEC: a repeat dedupeId (per app) within 24 h is dropped entirely: of an
 * event taken in, or of one posted with a delay and not taken in yet (other
 * than `selfId`, the delayed event now being taken in). Inside the
 * transaction, the caller holds the dedupe id's advisory lock (lockAll) so
 * two concurrent repeats see each other.
 */
export async function seenDedupeId(db: Database, workspaceId: string, app: string | undefined, dedupeId: string, selfId?: string): Promise<boolean> {
  const rows = await db.query(
    `select 1 from ingest.events where workspace_id = $1 and app is not distinct from $2 and dedupe_id = $3
        and received_at > now() - interval '24 hours'
     union all
     select 1 from ingest.scheduled_events where workspace_id = $1 and app is not distinct from $2 and dedupe_id = $3
        and created_at > now() - interval '24 hours' and id is distinct from $4
     limit 1`,
    [workspaceId, app ?? null, dedupeId, selfId ?? null],
  );
  return rows.length > 0;
}

export async function eventById(db: Database, workspaceId: string, id: string): Promise<EventRow | undefined> {
  const rows = await db.query<EventRow>(
    'select id, name, app, source, data, tags, scheduled_for, woke, triggered, received_at from ingest.events where workspace_id = $1 and id = $2',
    [workspaceId, id],
  );
  return rows[0];
}

/** The event log, newest first: by app, name, and the tags an event carries (every one given). */
export async function listEvents(db: Database, workspaceId: string, f: { app?: string; name?: string; tags?: string[]; limit: number }): Promise<EventRow[]> {
  return db.query<EventRow>(
    `select id, name, app, source, data, tags, scheduled_for, woke, triggered, received_at from ingest.events
      where workspace_id = $1 and ($2::text is null or app = $2) and ($3::text is null or name = $3)
        and ($5::text[] is null or (tags is not null and tags @> $5::text[]))
      order by received_at desc, id desc limit $4`,
    [workspaceId, f.app ?? null, f.name ?? null, f.limit, f.tags ?? null],
  );
}
