import { setTimeout as sleep } from 'node:timers/promises';

export interface UntilReachableOptions {
  /** Told of every failed attempt, so a stuck start says what it is waiting for. */
  warn(fields: { what: string; attempt: number; err: string; retryInMs: number }, msg: string): void;
  /** Give up (and rethrow the last error) after this long. */
  timeoutMs: number;
  /** First wait between attempts; doubles up to maxDelayMs. @default 200 */
  delayMs?: number;
  /** @default 2000 */
  maxDelayMs?: number;
  sleep?: (ms: number) => Promise<unknown>;
  now?: () => number;
}

/**
 * Try `attempt` until it resolves or `timeoutMs` has passed. A service
 * started in the same moment as Postgres or nats-server (a fresh cluster,
 * a node restart, one crash overlapping another) waits for them instead of
 * exiting: an orchestrator restarts a crashed pod, but only after a backoff
 * that grows with every crash.
 */
export async function untilReachable<T>(what: string, attempt: () => Promise<T>, opts: UntilReachableOptions): Promise<T> {
  const now = opts.now ?? Date.now;
  const wait = opts.sleep ?? sleep;
  const deadline = now() + opts.timeoutMs;
  let delay = opts.delayMs ?? 200;
  for (let n = 1; ; n++) {
    try {
      return await attempt();
    } catch (err) {
      const left = deadline - now();
      if (left <= 0) throw err;
      const retryInMs = Math.min(delay, left);
      opts.warn({ what, attempt: n, err: (err as Error).message, retryInMs }, `${what} not reachable yet; retrying`);
      await wait(retryInMs);
      delay = Math.min(delay * 2, opts.maxDelayMs ?? 2000);
    }
  }
}
