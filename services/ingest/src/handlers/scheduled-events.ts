import { withTxRetry, type Database } from '@dws/db';
import type { Logger } from '@dws/log';
import { ids, type Caller } from '@dws/runtime';
import type { EventInput } from '../domain/event-input.js';
import { seenDedupeId } from '../store/events.js';
import { dedupeLock, lockAll } from '../store/gates.js';
import { claimDueScheduled, deleteScheduled, insertScheduled, type NewScheduled, type ScheduledRow } from '../store/scheduled-events.js';
import { emptyResult, type Incoming, type IngestResult } from './ingestor.js';
import { iso } from './read-values.js';

/** Due events claimed per round: a backlog drains over several rounds. */
const BATCH = 100;
/** How long a claim holds its events before another replica may take them over (the claimer died). */
const LEASE_MS = 30_000;

/**
 * Events posted with a `delay`: stored as they came (their dedupe id
 * checked now, so a retried POST is a repeat), then taken in once due, as
 * though posted then: their waiters wake and their triggers start runs
 * under the flow control of that moment. Until then they wake nothing,
 * start nothing, and can be cancelled.
 */
export class ScheduledEvents {
  constructor(private readonly d: { db: Database; log: Logger; onArmed: () => void }) {}

  /**
   * Store `items` (each with `ev.dueAtMs`) until due; a repeat dedupe id
   * stores nothing, nor does an emit's id stored or taken in already (its
   * command redelivered).
   */
  async schedule(caller: Caller, items: Incoming[]): Promise<IngestResult[]> {
    const results = await withTxRetry(this.d.db, async (tx) => {
      await lockAll(tx, items.flatMap(({ ev }) => (ev.dedupeId ? [dedupeLock(caller.workspaceId, ev.app, ev.dedupeId)] : [])));
      const seen = new Set<string>();
      const rows: NewScheduled[] = [];
      const out: IngestResult[] = [];
      for (const { ev, source, id: given } of items) {
        const result: IngestResult = { ...emptyResult(), suspended: caller.suspended === true };
        out.push(result);
        if (ev.dedupeId) {
          const k = dedupeLock(caller.workspaceId, ev.app, ev.dedupeId);
          if (seen.has(k) || (await seenDedupeId(tx, caller.workspaceId, ev.app, ev.dedupeId))) {
            result.deduped = true;
            continue;
          }
          seen.add(k);
        }
        const id = given ?? ids.event();
        rows.push({
          id, workspace_id: caller.workspaceId, name: ev.name, app: ev.app ?? null, data: ev.dataJson, dedupe_id: ev.dedupeId ?? null,
          runner: ev.runner ?? null, target_app: ev.targetApp ?? null, session: ev.session ?? null, tags: ev.tags ?? null, source,
          actor: caller.actor, key_kind: caller.keyKind, via: caller.via ?? 'api', scheduledForMs: ev.dueAtMs!,
        });
        Object.assign(result, { id, scheduled: true, scheduledFor: new Date(ev.dueAtMs!).toISOString() });
      }
      const stored = await insertScheduled(tx, rows);
      return out.map((r) => (r.id === undefined || stored.has(r.id) ? r : { ...emptyResult(), deduped: true }));
    });
    this.d.onArmed();
    return results;
  }

  /**
   * Take in the events that are due, each under its id and as its poster:
   * the ingest transaction that records it deletes its row, so it is taken
   * in once (a claim whose replica died is taken over once its lease passed,
   * and finds nothing recorded).
   * @returns how many were claimed
   */
  async takeInDue(ingest: (caller: Caller, items: Incoming[]) => Promise<IngestResult[]>): Promise<number> {
    const due = await claimDueScheduled(this.d.db, BATCH, LEASE_MS);
    const byCaller = new Map<string, ScheduledRow[]>();
    for (const r of due) {
      const k = [r.workspace_id, r.actor, r.key_kind, r.via].join('\u001f');
      const rows = byCaller.get(k);
      if (rows) rows.push(r);
      else byCaller.set(k, [r]);
    }
    await Promise.all(
      [...byCaller.values()].map(async (rows) => {
        const r0 = rows[0]!;
        const caller: Caller = { workspaceId: r0.workspace_id, actor: r0.actor, keyKind: r0.key_kind, requestId: ids.generic('req'), via: r0.via as Caller['via'] };
        try {
          await ingest(caller, rows.map(incomingOf));
        } catch (err) {
          this.d.log.warn({ err, events: rows.map((r) => r.id) }, 'delayed events could not be taken in; retried once their claim lapses');
        }
      }),
    );
    return due.length;
  }
}

/** A stored delayed event as the ingestor takes it in now (no delay left). */
function incomingOf(r: ScheduledRow): Incoming {
  const ev: EventInput = {
    name: r.name,
    app: r.app ?? undefined,
    // An emit broadcasts unless it names a targetApp (SPEC Emit), whatever app emitted it; a POST is scoped to its app.
    scope: r.target_app ?? (r.source === 'emit' ? undefined : r.app) ?? undefined,
    dataJson: r.data,
    data: JSON.parse(r.data) as unknown,
    dedupeId: r.dedupe_id ?? undefined,
    runner: r.runner ?? undefined,
    targetApp: r.target_app ?? undefined,
    session: r.session ?? undefined,
    ...(r.tags ? { tags: r.tags } : {}),
  };
  return { ev, source: r.source, id: r.id, scheduledForMs: new Date(r.scheduled_for).getTime(), record: (tx) => deleteScheduled(tx, r.id) };
}

/** A delayed event not yet taken in, as the event reads show it (SPEC Event record, with its `scheduledFor`). */
export const scheduledRecord = (r: ScheduledRow) => ({
  id: r.id,
  name: r.name,
  app: r.app ?? undefined,
  source: r.source,
  data: JSON.parse(r.data) as unknown,
  ...(r.tags ? { tags: r.tags } : {}),
  receivedAt: iso(r.created_at),
  scheduled: true,
  scheduledFor: iso(r.scheduled_for),
  woke: 0,
  triggered: [] as { workflow: string; app: string; runId: string }[],
});
