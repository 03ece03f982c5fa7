import type { Database } from '@dws/db';
import { invalid, isServiceError, notFound } from '@dws/protocol';
import type { ApiHandler } from '@dws/runtime';
import { parseEvent, parseEventBody } from '../domain/event-input.js';
import { eventById, listEvents, type EventRow } from '../store/events.js';
import type { Ingestor } from './ingestor.js';
const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

function eventRecord(r: EventRow) {
  return {
    id: r.id,
    name: r.name,
    app: r.app ?? undefined,
    source: r.source,
    data: JSON.parse(r.data) as unknown,
    receivedAt: (r.received_at instanceof Date ? r.received_at : new Date(r.received_at)).toISOString(),
    woke: r.woke,
    triggered: r.triggered.map((t) => ({ workflow: t.workflow, app: t.app, runId: t.runId })),
  };
}

export function ingestApi(deps: { db: Database; ingestor: Ingestor }): Record<string, ApiHandler> {
  const { db, ingestor } = deps;
  return {
    /** POST /events: one event or an array of up to 100; each gets its own result. */
    async 'events.ingest'({ caller, body }) {
      const { batch, items } = parseEventBody(body);
      const parsed = items.map((item) => {
        try {
          return { ok: true as const, ev: parseEvent(item) };
        } catch (err) {
          if (!batch || !isServiceError(err)) throw err;
          return { ok: false as const, error: { code: err.code, message: err.message } };
        }
      });
      const ok = parsed.flatMap((p) => (p.ok ? [{ ev: p.ev, source: 'api' as const }] : []));
      const accepted = await ingestor.ingest(caller, ok);
      const results = parsed.map((p) => (p.ok ? accepted.shift()! : { error: p.error }));
      return { status: 202, body: batch ? { results } : results[0] };
    },

    async 'events.get'({ caller, params }) {
      const row = params.id ? await eventById(db, caller.workspaceId, params.id) : undefined;
      if (!row) throw notFound('event');
      return { body: eventRecord(row) };
    },

    async 'events.list'({ caller, query }) {
      const limitRaw = query.limit === undefined ? 100 : Number(query.limit);
      if (!Number.isInteger(limitRaw) || limitRaw < 1) throw invalid('invalid_limit', 'limit must be an integer from 1 to 1000.');
      const rows = await listEvents(db, caller.workspaceId, { app: str(query.app), name: str(query.name), limit: Math.min(1000, limitRaw) });
      return { body: rows.map(eventRecord) };
    },
  };
}
