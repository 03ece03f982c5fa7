import type { Bus, Subscription } from '@dws/bus';
import type { Database } from '@dws/db';
import { fromBinary, RunFinishedSchema } from '@dws/proto';
import { streams, subjects } from '@dws/runtime';
import { cancelOpenOfRun } from '../store/approvals.js';

/**
 * A run went terminal (cancelled, failed by a parallel branch, ...): its
 * open approvals are cancelled with no decision on record (SPEC Approval
 * rule 2). Idempotent: a redelivery finds nothing open. Decided approvals
 * stay as they are (the audit trail). A run that ended with nothing open
 * (the scheduler says so) costs no statement.
 */
export function consumeRunEnds(d: { bus: Bus; db: Database }): Promise<Subscription> {
  return d.bus.consume(
    { stream: streams.schedulerFacts.name, durable: 'approvals-run-ends', filterSubject: subjects.runFinished, concurrency: 8 },
    async (msg) => {
      const f = fromBinary(RunFinishedSchema, msg.data);
      // Most runs never waited on anything: no statement for them.
      if (f.nothingOpen) return;
      await cancelOpenOfRun(d.db, f.workspaceId, f.runId);
    },
  );
}
