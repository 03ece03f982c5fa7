import type { Database } from '@dws/db';

/** Which kinds of ingest's due-time work have a row due now. */
export interface DueKinds {
  cron: boolean;
  debounces: boolean;
  batches: boolean;
}

/**
 * One statement, outside any transaction and without locks: what a poll that
 * finds nothing due costs (it used to be a transaction per kind, three
 * round trips each, four times a second on every replica). Each condition is
 * its claim's own (dueSchedules, takeDueDebounces, dueBatches), so whatever
 * they would take is seen here.
 */
export async function dueKinds(db: Database): Promise<DueKinds> {
  const rows = await db.query<DueKinds>(
    `select exists (select 1 from ingest.cron_schedules where next_at <= now()) as cron,
            exists (select 1 from ingest.debounces where due_at <= now()) as debounces,
            exists (select 1 from ingest.batches where due_at <= now()) as batches`,
  );
  return rows[0] ?? { cron: false, debounces: false, batches: false };
}
