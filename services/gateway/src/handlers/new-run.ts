import { isServiceError } from '@dws/protocol';
import { idTimeMs } from '../domain/timeline.js';

/**
 * Read-your-writes for the run id in a 202: POST /events answers while the
 * StartRun is still on its way to the scheduler (a few ms), so a read of a
 * run born within the last minute that the scheduler does not know yet is
 * retried, backing off from 2 ms, for up to `waitMs` before its 404.
 *
 * `stored`, when given, resolves once the run has surely been stored (its
 * stream received a live frame): then the retry goes at once and the
 * backoff can start long, so a busy scheduler is not polled for a run it
 * has not reached yet.
 */
export async function awaitNewRun<T>(
  runId: string,
  call: () => Promise<T>,
  opts: { waitMs: number; stop?: () => boolean; stored?: () => Promise<void> },
): Promise<T> {
  const born = idTimeMs(runId);
  const fresh = born !== undefined && born > Date.now() - 60_000 && born < Date.now() + 5_000;
  const deadline = Date.now() + opts.waitMs;
  for (let pause = opts.stored ? 50 : 2; ; pause = Math.min(pause * 2, opts.stored ? 500 : 100)) {
    try {
      return await call();
    } catch (err) {
      const missing = isServiceError(err) && err.code === 'run_not_found';
      if (!missing || !fresh || Date.now() >= deadline || opts.stop?.()) throw err;
      let timer: NodeJS.Timeout | undefined;
      const backoff = new Promise((r) => (timer = setTimeout(r, Math.min(pause, Math.max(0, deadline - Date.now())))));
      // Without a signal, the backoff alone (a race with `undefined` would end at once: a busy loop of reads).
      await (opts.stored ? Promise.race([backoff, opts.stored()]) : backoff);
      clearTimeout(timer);
    }
  }
}
