import { request } from 'undici';

export interface ApiReply<T = any> {
  status: number;
  body: T;
  headers: Record<string, string | string[] | undefined>;
}

/** A call to the public API, as any HTTP client would make it. */
export async function api<T = any>(
  base: string,
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
  path: string,
  opts: { key?: string; body?: unknown; raw?: string; headers?: Record<string, string>; timeoutMs?: number } = {},
): Promise<ApiReply<T>> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.key) headers.authorization = `Bearer ${opts.key}`;
  let body: string | undefined;
  if (opts.raw !== undefined) body = opts.raw;
  else if (opts.body !== undefined) body = JSON.stringify(opts.body);
  if (body !== undefined) headers['content-type'] ??= 'application/json';
  // A timeout aborts with a DOMException named 'TimeoutError' (undici's own defaults wait 300 s).
  const signal = opts.timeoutMs !== undefined ? AbortSignal.timeout(opts.timeoutMs) : undefined;
  const res = await request(`${base}${path}`, { method, headers, body, signal });
  const text = await res.body.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    /* not JSON: keep the text so the assertion shows it */
  }
  return { status: res.statusCode, body: parsed as T, headers: res.headers };
}

/**
 * Thrown by an `eventually` check when what it saw can never become what it
 * waits for (a run that failed while the test waits for it to succeed):
 * `eventually` rethrows it at once instead of polling on to the deadline.
 */
export class Terminal extends Error {
  /** Checked by value, not by class: module copies in jest lose class identity. */
  readonly terminal = true;
  constructor(message: string) {
    super(message);
    this.name = 'Terminal';
  }
}

const isTerminal = (err: unknown): boolean => (err as { terminal?: unknown } | undefined)?.terminal === true;

/**
 * Poll until `check` returns a value, or fail with the last thing seen. A
 * check that throws `Terminal` ends the wait at once with that error; any
 * other throw is taken as "not yet" (the service may still be starting).
 */
export async function eventually<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (err) {
      if (isTerminal(err)) throw err;
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** SPEC Run statuses: a run in one of these never moves again. */
export const TERMINAL_STATUSES: readonly string[] = ['succeeded', 'failed', 'cancelled'];

/**
 * An `eventually` check on a run read: the run once its status is one of
 * `want`; undefined while it may still get there; `Terminal` (carrying the
 * run's error) once it ended in another status.
 */
export function runReached<R extends { status?: string; error?: unknown; result?: unknown }>(
  run: R | undefined,
  want: string | readonly string[] = 'succeeded',
): R | undefined {
  const wanted = typeof want === 'string' ? [want] : want;
  if (!run?.status) return undefined;
  if (wanted.includes(run.status)) return run;
  if (TERMINAL_STATUSES.includes(run.status)) {
    throw new Terminal(`run ended ${run.status} while waiting for ${wanted.join('|')}: ${JSON.stringify(run.error ?? run.result ?? null)}`);
  }
  return undefined;
}
