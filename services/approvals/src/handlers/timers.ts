import type { Database } from '@dws/db';
import type { Logger } from '@dws/log';
import { PollLoop, resolveStepMessage, type Outbox, type OutboxMessage } from '@dws/runtime';
import { nowMs } from '@dws/telemetry';
import { decidedResult, onExpiry, TIMEOUT_ACTOR } from '../domain/decision.js';
import type { OnTimeout } from '../domain/request.js';
import { closeTimer, lockDueTimers, nextTimerInMs, recordDecision } from '../store/approvals.js';
import type { ApprovalRow } from '../domain/record.js';
import { approvalAttributes, traceApproval } from './approval-trace.js';

/** Rows taken per transaction: a backlog drains over several rounds instead of one long transaction. */
const BATCH = 100;

export interface TimersOptions {
  /**
   * The longest sleep between looks. A replica sleeps until its next armed
   * timer and is woken when it arms one; this bounds how late it fires a
   * timer another replica armed and did not fire (it crashed). @default 5000
   */
  pollMs?: number;
}

/**
 * The approvals' timeouts, on every replica. Due rows are locked with FOR
 * UPDATE SKIP LOCKED in the transaction that applies their onTimeout and
 * writes the ResolveStep to the outbox: a timeout fires once across
 * replicas; a crash before commit leaves it due for the next round; a
 * decision holding the row's lock wins, and the timeout then finds it closed.
 */
export class Timers {
  private readonly loop: PollLoop;

  constructor(
    private readonly d: { db: Database; log: Logger; outbox: Outbox },
    opts: TimersOptions = {},
  ) {
    this.loop = new PollLoop(() => this.fireDue(), {
      pollMs: opts.pollMs ?? 5000,
      nextDueInMs: () => nextTimerInMs(this.d.db),
      onError: (err) => this.d.log.warn({ err }, 'approval timeouts failed; retried at the next poll'),
    });
  }

  start(): void {
    this.loop.start();
  }

  /** Look now (a timer was armed), not at the next poll. */
  kick(): void {
    this.loop.kick();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** Fire every due timeout; returns how many fired. */
  async fireDue(): Promise<number> {
    let total = 0;
    for (;;) {
      const startMs = nowMs();
      const fired: { a: ApprovalRow; status: string }[] = [];
      const { n, pending } = await this.d.db.tx(async (tx) => {
        fired.length = 0;
        const due = await lockDueTimers(tx, BATCH);
        const out: OutboxMessage[] = [];
        for (const a of due) {
          const target = { workspaceId: a.workspace_id, runId: a.run_id, stepId: a.step_id };
          const e = onExpiry({ id: a.id, tool: a.tool, onTimeout: a.on_timeout as OnTimeout });
          if (e.kind === 'escalate') {
            await closeTimer(tx, a.id, 'escalated');
          } else if (e.kind === 'fail') {
            await closeTimer(tx, a.id, 'cancelled');
            out.push(resolveStepMessage(target, { error: e.error }));
          } else {
            await recordDecision(tx, a.id, e.verdict, TIMEOUT_ACTOR, 'timeout');
            out.push(resolveStepMessage(target, { data: decidedResult(a, e.verdict, TIMEOUT_ACTOR, 'timeout') }));
          }
          fired.push({ a, status: e.kind === 'escalate' ? 'escalated' : e.kind === 'fail' ? 'cancelled' : e.verdict.status });
        }
        return { n: due.length, pending: await this.d.outbox.enqueue(tx, out) };
      });
      await this.d.outbox.afterCommit(pending);
      for (const { a, status } of fired) traceApproval('approval.timeout', a.run_id, startMs, approvalAttributes(a, status));
      total += n;
      if (n < BATCH || this.loop.stopping) return total;
    }
  }
}
