import type { Database } from '@dws/db';

/** How long an applied cancelOn waits for runs that started before its event but reach the scheduler after it. */
export const CANCEL_SIGNAL_TTL_MS = 3_600_000;

export interface CancelSignal {
  eventId: string;
  eventName: string;
  /** JSON text. */
  eventData: string;
  /** RFC 3339. */
  eventTs: string;
  ifExpr: string;
  withinMs: number;
  actor: string | null;
}

/**
 * Serialises, per workflow, a cancelOn being applied with a run of it being
 * stored: whichever goes second sees the other (the run in the cancel's read
 * of active runs, or the signal in the run's check).
 */
export async function lockCancelOn(tx: Database, workspaceId: string, app: string, workflow: string): Promise<void> {
  await tx.query('select pg_advisory_xact_lock(hashtext($1))', [`cancel-on:${workspaceId}:${app}:${workflow}`]);
}

/** Keep a cancelOn for the runs that arrive after it (and drop the expired ones of every workflow: the table stays small). */
export async function storeCancelSignal(tx: Database, s: CancelSignal & { workspaceId: string; app: string; workflow: string }): Promise<void> {
  await tx.query('delete from scheduler.cancel_signals where expires_at < now()');
  await tx.query(
    `insert into scheduler.cancel_signals (workspace_id, app, workflow, event_id, event_name, event_data, event_ts, if_expr, within_ms, actor, expires_at)
     values ($1, $2, $3, $4, $5, $6, $7::timestamptz, $8, $9, $10, now() + $11::bigint * interval '1 millisecond')`,
    [s.workspaceId, s.app, s.workflow, s.eventId, s.eventName, s.eventData, s.eventTs, s.ifExpr, s.withinMs, s.actor, CANCEL_SIGNAL_TTL_MS],
  );
}

/**
 * The cancelOn signals a run being stored started before: events after its
 * creation (and within their `timeout` of it), never the run's own event.
 */
export async function signalsFor(
  tx: Database,
  r: { workspaceId: string; app: string; workflow: string; createdAtMs: number; eventId: string | null },
): Promise<CancelSignal[]> {
  const rows = await tx.query<{ event_id: string; event_name: string; event_data: string; event_ts: string; if_expr: string; within_ms: number; actor: string | null }>(
    `select event_id, event_name, event_data, to_char(event_ts at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as event_ts, if_expr, within_ms, actor
       from scheduler.cancel_signals
      where workspace_id = $1 and app = $2 and workflow = $3 and expires_at > now()
        and event_ts > to_timestamp($4::bigint / 1000.0) and event_id is distinct from $5
        and (within_ms = 0 or to_timestamp($4::bigint / 1000.0) > event_ts - within_ms * interval '1 millisecond')
      order by event_ts`,
    [r.workspaceId, r.app, r.workflow, r.createdAtMs, r.eventId],
  );
  return rows.map((x) => ({
    eventId: x.event_id,
    eventName: x.event_name,
    eventData: x.event_data,
    eventTs: x.event_ts,
    ifExpr: x.if_expr,
    withinMs: Number(x.within_ms),
    actor: x.actor,
  }));
}
