import type { Bus, Subscription } from '@dws/bus';
import type { Database } from '@dws/db';
import { fromBinary, RunFinishedSchema } from '@dws/proto';
import { streams, subjects } from '@dws/runtime';
import { cancelOpenOfRun } from '../store/approvals.js';

/**
 * A run went terminal with a step still open (cancelled, failed by a parallel
 * branch, ...): its open approvals are cancelled with no decision on record
 * (SPEC Approval rule 2). The scheduler sends only such runs' ends here
 * (`approvals.cmd.close`), not every run's. Idempotent: a redelivery finds
 * nothing open. Decided approvals stay as they are (the audit trail).
 */
export function consumeRunEnds(d: { bus: Bus; db: Database }): Promise<Subscription> {
  return d.bus.consume(
    { stream: streams.approvalsCmds.name, durable: 'approvals-close', filterSubject: subjects.closeApprovals, concurrency: 8 },
    async (msg) => {
      const f = fromBinary(RunFinishedSchema, msg.data);
      await cancelOpenOfRun(d.db, f.workspaceId, f.runId);
    },
  );
}
