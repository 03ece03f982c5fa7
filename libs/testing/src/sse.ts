import { request } from 'undici';

/** A minimal SSE client on undici for tests: collects events and comment lines until the server ends the stream (or `close()` drops it, like a broken connection). */

export interface SseEvent {
  id?: string;
  event?: string;
  data?: string;
}

export async function sse(
  base: string,
  path: string,
  opts: { key?: string; headers?: Record<string, string> } = {},
): Promise<{
  status: number;
  headers: Record<string, string | string[] | undefined>;
  events: SseEvent[];
  comments: string[];
  /** When each event arrived (ms epoch), index for index with `events`: for lag measurements. */
  receivedAt: number[];
  ended: Promise<void>;
  /** After `ended`: true when the server ended the stream (not a reset or our own close). */
  cleanEnd(): boolean;
  /** Resolves once `n` events have arrived. */
  waitFor(n: number, timeoutMs?: number): Promise<void>;
  close(): void;
  body: any;
}> {
  const headers: Record<string, string> = { accept: 'text/event-stream', ...opts.headers };
  if (opts.key) headers.authorization = `Bearer ${opts.key}`;
  const ac = new AbortController();
  const res = await request(`${base}${path}`, { method: 'GET', headers, signal: ac.signal });
  const events: SseEvent[] = [];
  const comments: string[] = [];
  const receivedAt: number[] = [];
  const waiters: { n: number; resolve: () => void }[] = [];
  const ctype = String(res.headers['content-type'] ?? '');
  if (!ctype.startsWith('text/event-stream')) {
    const text = await res.body.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      /* keep text */
    }
    return { status: res.statusCode, headers: res.headers, events, comments, receivedAt, ended: Promise.resolve(), cleanEnd: () => true, waitFor: async () => {}, close: () => {}, body };
  }
  let buf = '';
  let cur: SseEvent = {};
  let clean = false;
  const ended = (async () => {
    try {
      for await (const chunk of res.body) {
        buf += (chunk as Buffer).toString('utf8');
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (line === '') {
            if (cur.data !== undefined || cur.event !== undefined) {
              events.push(cur);
              receivedAt.push(Date.now());
            }
            cur = {};
            for (const w of [...waiters]) if (events.length >= w.n) w.resolve();
          } else if (line.startsWith(':')) comments.push(line.slice(1).trim());
          else {
            const i = line.indexOf(':');
            const field = i < 0 ? line : line.slice(0, i);
            const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
            if (field === 'id' || field === 'event' || field === 'data') cur[field] = value;
          }
        }
      }
      clean = true;
    } catch {
      /* dropped by close(), or reset: what arrived is kept */
    }
  })();
  return {
    status: res.statusCode,
    headers: res.headers,
    events,
    comments,
    receivedAt,
    ended,
    cleanEnd: () => clean,
    body: undefined,
    waitFor(n, timeoutMs = 10_000) {
      if (events.length >= n) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`only ${events.length} of ${n} events within ${timeoutMs} ms`)), timeoutMs);
        waiters.push({
          n,
          resolve: () => {
            clearTimeout(t);
            resolve();
          },
        });
      });
    },
    close: () => ac.abort(),
  };
}
