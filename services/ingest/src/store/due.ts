import type { Database } from '@dws/db';
import { msUntil } from '@dws/runtime';
import { RELEASABLE_EXISTS } from './held-events.js';

/** Which kinds of ingest's due-time work have a row due now. */
export interface DueKinds {
  cron: boolean;
  debounces: boolean;
  batches: boolean;
  /** Delayed events (scheduled_events), due or claimed by a replica that let its lease lapse. */
  delayed: boolean;
  /** Schedules made through the API. */
  apiSchedules: boolean;
  /** Events held for a workflow paused with `hold` that is resumed now. */
  held: boolean;
}

/**
 * One statement, outside any transaction and without locks: what a poll that
 * finds nothing due costs (it used to be a transaction per kind, three
 * round trips each, four times a second on every replica). Each condition is
 * its claim's own (dueSchedules, takeDueDebounces, dueBatches, claimDueScheduled, dueApiSchedules), so whatever
 * they would take is seen here.
 */
export async function dueKinds(db: Database): Promise<DueKinds> {
  const rows = await db.query<DueKinds>(
    `select exists (select 1 from ingest.cron_schedules where next_at <= now()) as cron,
            exists (select 1 from ingest.debounces where due_at <= now()) as debounces,
            exists (select 1 from ingest.batches where due_at <= now()) as batches,
            exists (select 1 from ingest.scheduled_events where due_at <= now()) as delayed,
            exists (select 1 from ingest.schedules where next_at <= now()) as "apiSchedules",
            ${RELEASABLE_EXISTS} as held`,
  );
  return rows[0] ?? { cron: false, debounces: false, batches: false, delayed: false, apiSchedules: false, held: false };
}

/**
 * Milliseconds until the earliest cron tick (registered or made through the API), debounce or batch timeout, or delayed event (0 or
 * less: one is due, or held events of a workflow resumed wait), undefined when none is armed: what an idle replica asks
 * before it sleeps until then.
 */
export function nextDueInMs(db: Database): Promise<number | undefined> {
  return msUntil(
    db,
    `select least((select min(next_at) from ingest.cron_schedules), (select min(due_at) from ingest.debounces), (select min(due_at) from ingest.batches),
            (select min(due_at) from ingest.scheduled_events), (select min(next_at) from ingest.schedules),
            case when ${RELEASABLE_EXISTS} then now() end)`,
  );
}
