import type { Database } from '@dws/db';
import { conflict, invalid, isServiceError, notFound, tagsOfQuery } from '@dws/protocol';
import type { ApiBatchHandler, ApiCall, ApiHandler, ApiResult } from '@dws/runtime';
import { parseEvent, parseEventBody, type EventInput } from '../domain/event-input.js';
import { eventById, listEvents, type EventRow } from '../store/events.js';
import { cancelScheduled, listScheduled, scheduledById } from '../store/scheduled-events.js';
import { listHeld } from '../store/held-events.js';
import { iso, listLimit, str } from './read-values.js';
import { scheduledRecord } from './scheduled-events.js';
import { RecordedUnsettled, type Incoming, type IngestResult, type Ingestor } from './ingestor.js';

function eventRecord(r: EventRow) {
  return {
    id: r.id,
    name: r.name,
    app: r.app ?? undefined,
    source: r.source,
    data: JSON.parse(r.data) as unknown,
    ...(r.tags ? { tags: r.tags } : {}),
    receivedAt: (r.received_at instanceof Date ? r.received_at : new Date(r.received_at)).toISOString(),
    // Posted with a delay and taken in since: when it was due (receivedAt is when it was taken in).
    ...(r.scheduled_for !== null ? { scheduledFor: iso(r.scheduled_for) } : {}),
    woke: r.woke,
    triggered: r.triggered.map((t) => ({ workflow: t.workflow, app: t.app, runId: t.runId })),
  };
}

/** GET /events and GET /events/scheduled: app, name, limit. */
const listFilter = (query: Record<string, unknown>) => ({ app: str(query.app), name: str(query.name), limit: listLimit(query.limit) });

/** A POST /events body taken apart: each item parsed, or its error (a batch's bad item is its own result; a single bad event fails the call). */
interface ParsedPost {
  batch: boolean;
  parsed: ({ ok: true; ev: EventInput } | { ok: false; error: { code: string; message: string } })[];
}

/**
 * The body of a POST, with its Idempotency-Key (`key`) as its events'
 * dedupeId: the event's, or a batch's i-th event's `<key>:<i>`, so the POST
 * sent again is dropped as a repeat (SPEC dedupeId). An event that names a
 * dedupeId of its own beside the key is refused: which one would hold?
 */
function parsePost(body: unknown, key?: string): ParsedPost {
  const { batch, items } = parseEventBody(body);
  const parsed = items.map((item, i) => {
    try {
      const ev = parseEvent(item);
      if (key === undefined) return { ok: true as const, ev };
      if (ev.dedupeId !== undefined) throw invalid('invalid_event', 'An event with a dedupeId takes no Idempotency-Key: the key is its dedupeId. Send one or the other.');
      return { ok: true as const, ev: { ...ev, dedupeId: batch ? `${key}:${i}` : key } };
    } catch (err) {
      if (!batch || !isServiceError(err)) throw err;
      return { ok: false as const, error: { code: err.code, message: err.message } };
    }
  });
  return { batch, parsed };
}

const accepted = (p: ParsedPost): Incoming[] => p.parsed.flatMap((x) => (x.ok ? [{ ev: x.ev, source: 'api' as const }] : []));

/** The 202 of a POST whose accepted events came to `results` (in order). */
function answered(p: ParsedPost, results: IngestResult[]): ApiResult {
  let k = 0;
  const out = p.parsed.map((x) => (x.ok ? results[k++]! : { error: x.error }));
  return { status: 202, body: p.batch ? { results: out } : out[0] };
}

/** Events one ingest call takes for the POSTs of a batch: a transaction's worth (Ingestor's MAX_GROUP_EVENTS). */
const TOGETHER_MAX_EVENTS = 500;

/**
 * POST /events calls that came in one batch from the gateway: those of one
 * workspace, key and standing go to the ingestor as one call, as one POST
 * of all their events would (each then gets its own 202): many clients
 * posting one event each cost ingest about what one batch of them does.
 * The shared call carries its first POST's request id (its log lines and
 * wake); a call with trace context of its own goes alone (its spans are its
 * own). If a shared call fails having stored nothing, each POST of it is
 * tried alone, as it came; if it stored its events, each POST fails.
 */
async function ingestTogether(ingestor: Ingestor, calls: ApiCall[]): Promise<PromiseSettledResult<ApiResult>[]> {
  const out: PromiseSettledResult<ApiResult>[] = [];
  const groups = new Map<string, { at: number[]; posts: ParsedPost[]; events: number }[]>();
  calls.forEach((c, at) => {
    let post: ParsedPost;
    try {
      post = parsePost(c.body, c.headers['idempotency-key']);
    } catch (reason) {
      out[at] = { status: 'rejected', reason };
      return;
    }
    const { caller } = c;
    const key = caller.traceparent ? `alone ${at}` : [caller.workspaceId, caller.actor, caller.keyKind, caller.via, caller.suspended === true].join('\u001f');
    const chunks = groups.get(key) ?? [];
    groups.set(key, chunks);
    const events = post.parsed.length;
    let last = chunks[chunks.length - 1];
    if (!last || last.events + events > TOGETHER_MAX_EVENTS) chunks.push((last = { at: [], posts: [], events: 0 }));
    last.at.push(at);
    last.posts.push(post);
    last.events += events;
  });
  const alone = async (at: number, post: ParsedPost) => {
    try {
      out[at] = { status: 'fulfilled', value: answered(post, await ingestor.ingest(calls[at]!.caller, accepted(post))) };
    } catch (reason) {
      out[at] = { status: 'rejected', reason };
    }
  };
  await Promise.all(
    [...groups.values()].flat().map(async ({ at, posts }) => {
      if (at.length === 1) return alone(at[0]!, posts[0]!);
      let results: IngestResult[];
      try {
        results = await ingestor.ingest(calls[at[0]!]!.caller, posts.flatMap(accepted));
      } catch (reason) {
        // Stored already: each POST fails as it would have alone (its client retries).
        if (reason instanceof RecordedUnsettled) return void at.forEach((i) => (out[i] = { status: 'rejected', reason }));
        // Nothing stored: one POST's bad event must not fail the POSTs it shared the call with.
        return void (await Promise.all(at.map((i, k) => alone(i, posts[k]!))));
      }
      let k = 0;
      at.forEach((i, n) => {
        const mine = accepted(posts[n]!).length;
        out[i] = { status: 'fulfilled', value: answered(posts[n]!, results.slice(k, (k += mine))) };
      });
    }),
  );
  return out;
}

/** The calls of a batch that ingest takes together (serveApi's `together`). */
export const ingestTogetherApi = (deps: { ingestor: Ingestor }): Record<string, ApiBatchHandler> => ({
  'events.ingest': (calls) => ingestTogether(deps.ingestor, calls),
});

export function ingestApi(deps: { db: Database; ingestor: Ingestor }): Record<string, ApiHandler> {
  const { db, ingestor } = deps;
  return {
    /** POST /events: one event or an array of up to 100; each gets its own result. */
    async 'events.ingest'({ caller, body, headers }) {
      const post = parsePost(body, headers['idempotency-key']);
      return answered(post, await ingestor.ingest(caller, accepted(post)));
    },

    /** One event: taken in, or posted with a delay and not yet taken in (with its `scheduledFor`). */
    async 'events.get'({ caller, params }) {
      const id = params.id ?? '';
      const row = await eventById(db, caller.workspaceId, id);
      if (row) return { body: eventRecord(row) };
      const delayed = await scheduledById(db, caller.workspaceId, id);
      if (!delayed) throw notFound('event');
      return { body: scheduledRecord(delayed) };
    },

    /** GET /events: the log, newest first, by app, name and tag (a parameter given once is a string, repeated an array). */
    async 'events.list'({ caller, query }) {
      const rows = await listEvents(db, caller.workspaceId, { ...listFilter(query), tags: tagsOfQuery(query.tag) });
      return { body: rows.map(eventRecord) };
    },

    /** GET /events/scheduled: the events posted with a delay and not yet taken in, soonest first. */
    async 'events.scheduled'({ caller, query }) {
      const rows = await listScheduled(db, caller.workspaceId, listFilter(query));
      return { body: rows.map(scheduledRecord) };
    },

    /** GET /events/held: the events workflows paused with `hold` keep (by app, workflow), oldest first, each with the workflow it waits for. */
    async 'events.held'({ caller, query }) {
      const rows = await listHeld(db, caller.workspaceId, { app: str(query.app), workflow: str(query.workflow), limit: listLimit(query.limit) });
      return { body: rows.map((r) => ({ workflow: r.workflow, app: r.workflow_app, heldAt: iso(r.held_at), event: eventRecord(r) })) };
    },

    /** POST /events/{id}/cancel: a delayed event is dropped before it is taken in; one taken in (or being taken in) is a 409. */
    async 'events.cancel'({ caller, params }) {
      const id = params.id ?? '';
      const cancelled = await cancelScheduled(db, caller.workspaceId, id);
      if (cancelled === 'taking_in') throw conflict('event_not_scheduled', 'The event is being taken in now: its time has come.');
      if (cancelled) return { body: { ...scheduledRecord(cancelled), cancelled: true } };
      if (await eventById(db, caller.workspaceId, id)) throw conflict('event_not_scheduled', 'The event was already taken in: only an event posted with a delay can be cancelled, before its time.');
      throw notFound('event');
    },
  };
}
