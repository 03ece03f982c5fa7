import type { Database } from '@dws/db';
import { msUntil } from '@dws/runtime';

/** A delivery row as the reads return it. */
export interface DeliveryRow {
  id: string;
  app: string;
  endpoint_id: string | null;
  url: string;
  event_kind: string;
  source_run_id: string | null;
  payload: unknown;
  status: string;
  attempt_count: number;
  max_attempts: number;
  last_status_code: number | null;
  next_attempt_at: Date | string | null;
  created_at: Date | string;
  updated_at: Date | string;
  /** Keyset position: created_at to the microsecond, as text (a JS Date would drop the microseconds). */
  cursor_at: string;
}

export interface AttemptRow {
  id: string;
  attempt: number;
  outcome: string;
  status_code: number | null;
  response_snippet: string | null;
  error: string | null;
  duration_ms: number;
  created_at: Date | string;
}

const COLS = `id, app, endpoint_id, url, event_kind, source_run_id, payload, status, attempt_count, max_attempts, last_status_code,
  next_attempt_at, created_at, updated_at, to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as cursor_at`;

/** Newest first, keyset over (created_at, id). */
export function listDeliveries(
  db: Database,
  workspaceId: string,
  f: { status?: string; app?: string; limit: number; after?: { at: string; id: string } },
): Promise<DeliveryRow[]> {
  return db.query<DeliveryRow>(
    `select ${COLS} from webhook_dispatcher.deliveries
      where workspace_id = $1 and ($2::text is null or status = $2) and ($3::text is null or app = $3)
        and ($4::timestamptz is null or (created_at, id) < ($4::timestamptz, $5::text))
      order by created_at desc, id desc limit $6`,
    [workspaceId, f.status ?? null, f.app ?? null, f.after?.at ?? null, f.after?.id ?? null, f.limit],
  );
}

export async function deliveryById(db: Database, workspaceId: string, id: string, lock = false): Promise<DeliveryRow | undefined> {
  const rows = await db.query<DeliveryRow>(
    `select ${COLS} from webhook_dispatcher.deliveries where workspace_id = $1 and id = $2${lock ? ' for update' : ''}`,
    [workspaceId, id],
  );
  return rows[0];
}

export function attemptsOf(db: Database, deliveryId: string): Promise<AttemptRow[]> {
  return db.query<AttemptRow>(
    `select id, attempt, outcome, status_code, response_snippet, error, duration_ms, created_at
       from webhook_dispatcher.attempts where delivery_id = $1 order by attempt, created_at`,
    [deliveryId],
  );
}

/**
 * Re-queues a settled delivery: due now, with a fresh budget of `grant`
 * attempts on top of those already made (the attempt log is kept).
 */
export async function requeue(db: Database, id: string, grant: number): Promise<void> {
  await db.query(
    `update webhook_dispatcher.deliveries set status = 'pending', max_attempts = attempt_count + $2, next_attempt_at = now(), claim = null, updated_at = now()
      where id = $1`,
    [id, grant],
  );
}

export interface StatsRow {
  endpoint_id: string;
  delivered: number | string;
  succeeded: number | string;
  failed: number | string;
  last_delivery: Date | string | null;
}

/** Per-endpoint counts of deliveries created since `since`, every endpoint of the workspace included. */
export function endpointStats(db: Database, workspaceId: string, since: Date): Promise<StatsRow[]> {
  return db.query<StatsRow>(
    `select e.id as endpoint_id,
            count(d.id) as delivered,
            count(d.id) filter (where d.status = 'succeeded') as succeeded,
            count(d.id) filter (where d.status in ('exhausted', 'dead')) as failed,
            max(d.created_at) as last_delivery
       from webhook_dispatcher.endpoints e
       left join webhook_dispatcher.deliveries d on d.endpoint_id = e.id and d.created_at >= $2::timestamptz
      where e.workspace_id = $1
      group by e.id, e.created_at
      order by e.created_at, e.id`,
    [workspaceId, since.toISOString()],
  );
}

/**
 * Milliseconds until the next delivery a sender would claim (0 or less: due
 * now; a claimed one comes due again when its lease ends), or undefined when
 * none is open: one statement, what an idle sender's look costs.
 */
export function nextDeliveryInMs(db: Database): Promise<number | undefined> {
  return msUntil(db, `select min(next_attempt_at) from webhook_dispatcher.deliveries where status in ('pending', 'failed', 'delivering')`);
}
