import type { Logger } from '@dws/log';
import type { Database } from '@dws/db';
import { PollLoop } from '@dws/runtime';
import type { CancelRun } from '../handlers/control-api.js';
import { nextTimeoutInMs, timedOutRuns, type TimedOut } from '../store/timeouts.js';

/** Runs cancelled per statement's worth of due runs. */
const BATCH = 100;
/** How late at most a replica notices a timed run another replica started (it crashed, or the run is a child or a replay). */
const POLL_MS = 5_000;

const seconds = (ms: number) => (ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`);

/** The run's cancel message: which timeout, and how long it was. */
export function timeoutMessage(t: Pick<TimedOut, 'which' | 'ms'>): string {
  return t.which === 'start'
    ? `Timed out: the run did not start within ${seconds(t.ms)} (timeouts.start).`
    : `Timed out: the run did not finish within ${seconds(t.ms)} (timeouts.finish).`;
}

/**
 * Workflow `timeouts`, on every replica: a run past one is cancelled like a
 * POST /cancel (its step in flight is dropped, its children cancelled, its
 * run.cancelled fact sent), audited as a cancel by `system:timeout`. The loop
 * sleeps until the earliest deadline it knows of (one indexed statement over
 * the timed runs that have not ended), is told of a timed run this replica
 * stores (`within`), and looks at least every 5 s for the others.
 */
export class RunTimeouts {
  private readonly loop: PollLoop;

  constructor(private readonly d: { db: Database; log: Logger; cancel: CancelRun }) {
    this.loop = new PollLoop(() => this.round(), {
      pollMs: POLL_MS,
      onError: (err) => d.log.warn({ err }, 'run timeouts failed; retried at the next look'),
      nextDueInMs: () => nextTimeoutInMs(d.db),
    });
  }

  start(): void {
    this.loop.start();
  }

  /** A timed run was stored here: its earliest deadline is `ms` away. */
  within(ms: number): void {
    this.loop.within(ms);
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  private async round(): Promise<void> {
    for (;;) {
      const due = await timedOutRuns(this.d.db, BATCH);
      for (const t of due) {
        const caller = { workspaceId: t.workspace_id, actor: 'system:timeout', keyKind: '', requestId: '' };
        await this.d.cancel(caller, t.id, timeoutMessage(t), { timeout: { which: t.which, ms: t.ms } }, false);
      }
      if (due.length < BATCH || this.loop.stopping) return;
    }
  }
}
