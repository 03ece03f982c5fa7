import { setTimeout as sleep } from 'node:timers/promises';
import { errorMessage, type BusLogger } from './policy.js';

/**
 * How long an idempotent JetStream API call (a stream's or a durable's
 * create) keeps trying through a nats-server restart: the minute a
 * standalone service waits at start for the server to answer at all.
 */
export const ADMIN_PATIENCE_MS = 60_000;

/**
 * What a restarting nats-server answers an API request with: nothing (the
 * request or its reply was lost with the connection, so the client times
 * out), or no responders (JetStream not up yet). Anything else (a refused
 * config, a closed connection) is final.
 */
export function isTransientApiError(err: unknown): boolean {
  const names = [errName(err), errName((err as { cause?: unknown } | null)?.cause)];
  return names.some((n) => n === 'TimeoutError' || n === 'NoResponders' || n === 'JetStreamNotEnabled');
}

function errName(err: unknown): string | undefined {
  const name = (err as { name?: unknown } | null | undefined)?.name;
  return typeof name === 'string' ? name : undefined;
}

export interface AdminRetry {
  log: BusLogger;
  /** False once the bus is closing: stop trying. */
  isOpen(): boolean;
  patienceMs?: number;
  sleep?: (ms: number) => Promise<unknown>;
  now?: () => number;
}

/**
 * Run an idempotent JetStream API call until the server answers it. A
 * service started (or a consumer opened) while nats-server restarts would
 * otherwise fail its start on one lost request and exit.
 */
export async function untilAnswered<T>(what: string, call: () => Promise<T>, o: AdminRetry): Promise<T> {
  const now = o.now ?? Date.now;
  const wait = o.sleep ?? sleep;
  const deadline = now() + (o.patienceMs ?? ADMIN_PATIENCE_MS);
  for (let delay = 250; ; delay = Math.min(delay * 2, 2_000)) {
    try {
      return await call();
    } catch (err) {
      if (!isTransientApiError(err) || !o.isOpen() || now() + delay > deadline) throw err;
      o.log.warn({ what, err: errorMessage(err), retryInMs: delay }, 'JetStream did not answer; retrying');
      await wait(delay);
    }
  }
}
