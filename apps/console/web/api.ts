/**
 * The console's only door to the service: the public API under /v1, with the
 * signed-in key. Nothing here knows a service's internals.
 */

export interface Session {
  key: string;
  /** The person acting: sent as X-Service-Actor (the API honours it on console keys). */
  actor: string;
  /** A public key only reads: write actions are hidden. */
  canWrite: boolean;
}

const STORE = 'dws.console.session';

/** Per tab: the key lives in sessionStorage, so closing the tab signs out. */
export function loadSession(): Session | undefined {
  try {
    const raw = sessionStorage.getItem(STORE);
    if (!raw) return undefined;
    const s = JSON.parse(raw) as Session;
    return typeof s.key === 'string' && s.key ? s : undefined;
  } catch {
    return undefined;
  }
}

export function saveSession(s: Session | undefined): void {
  if (s) sessionStorage.setItem(STORE, JSON.stringify(s));
  else sessionStorage.removeItem(STORE);
}

let current: Session | undefined = loadSession();
const listeners = new Set<() => void>();
export const session = () => current;
export function setSession(s: Session | undefined): void {
  current = s;
  saveSession(s);
  for (const l of listeners) l();
}
export function onSessionChange(l: () => void): () => void {
  listeners.add(l);
  return () => listeners.delete(l);
}

/** The API's error body (CONTRACT.md), as an exception. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

function headers(s: Session | undefined, extra: Record<string, string> = {}): Record<string, string> {
  const h: Record<string, string> = { ...extra };
  if (s) {
    h.authorization = `Bearer ${s.key}`;
    if (s.actor) h['x-service-actor'] = s.actor;
  }
  return h;
}

export interface Page<T> {
  items: T[];
  next?: string;
}

async function call(method: string, path: string, body?: unknown, s: Session | undefined = current): Promise<Response> {
  const res = await fetch(`/v1${path}`, {
    method,
    headers: headers(s, body !== undefined ? { 'content-type': 'application/json' } : {}),
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  if (!res.ok) {
    let code = 'http_' + res.status;
    let message = res.statusText || 'Request failed';
    try {
      const j = (await res.json()) as { error?: { code?: string; message?: string } };
      if (j.error?.code) code = j.error.code;
      if (j.error?.message) message = j.error.message;
    } catch {
      /* not JSON: keep the status text */
    }
    // A key revoked mid-session: back to sign-in rather than a page of errors.
    if (res.status === 401 && s === current && current) setSession(undefined);
    throw new ApiError(res.status, code, message);
  }
  return res;
}

export async function get<T>(path: string): Promise<T> {
  return (await (await call('GET', path)).json()) as T;
}

/** A keyset page: the items plus X-Next-Cursor. */
export async function page<T>(path: string): Promise<Page<T>> {
  const res = await call('GET', path);
  return { items: (await res.json()) as T[], next: res.headers.get('x-next-cursor') ?? undefined };
}

export async function send<T = unknown>(method: 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown): Promise<T | undefined> {
  const res = await call(method, path, body);
  if (res.status === 204) return undefined;
  const text = await res.text();
  return text ? (JSON.parse(text) as T) : undefined;
}

/**
 * Check a key and learn what it may do, without side effects: a read
 * (401 for a bad key), then a write the API must refuse either way. A
 * public key is refused for its kind (403 key_read_only) before the body is
 * looked at; a writing key gets the 400 of the empty bulk replay.
 */
export async function probe(key: string, actor: string): Promise<Session> {
  const s: Session = { key, actor, canWrite: false };
  await call('GET', '/runs/stats', undefined, s);
  try {
    await call('POST', '/runs/bulk-replay', {}, s);
    s.canWrite = true;
  } catch (err) {
    const e = err as ApiError;
    s.canWrite = !(e.status === 403 && e.code === 'key_read_only');
  }
  return s;
}

export function qs(params: Record<string, string | number | boolean | undefined | null>): string {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '' && v !== false) u.set(k, String(v));
  const s = u.toString();
  return s ? `?${s}` : '';
}

export interface SseFrame {
  event: string;
  id?: string;
  data: unknown;
}

/**
 * Server-sent events read with fetch() streaming instead of EventSource, so
 * the request carries `Authorization` like every other call (EventSource
 * cannot send headers, and a key in the URL would end up in logs). It
 * reconnects after a drop (with Last-Event-ID when the stream numbers its
 * frames) until `signal` aborts or `onEnd` says the stream is over.
 */
export function stream(
  path: string,
  onFrame: (f: SseFrame) => void,
  opts: { signal: AbortSignal; onState?: (live: boolean) => void; reconnect?: boolean },
): void {
  let lastId: string | undefined;
  const run = async (): Promise<void> => {
    let backoff = 500;
    while (!opts.signal.aborted) {
      let ended = false;
      try {
        const h = headers(current, { accept: 'text/event-stream' });
        if (lastId) h['last-event-id'] = lastId;
        const res = await fetch(`/v1${path}`, { headers: h, signal: opts.signal });
        if (res.status === 401) {
          setSession(undefined);
          return;
        }
        if (!res.ok || !res.body) throw new Error(`stream ${res.status}`);
        opts.onState?.(true);
        backoff = 500;
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let cut: number;
          while ((cut = buf.search(/\r?\n\r?\n/)) >= 0) {
            const block = buf.slice(0, cut);
            buf = buf.slice(cut + (buf[cut] === '\r' ? 4 : 2));
            const f = parseBlock(block);
            if (!f) continue;
            if (f.id) lastId = f.id;
            onFrame(f);
          }
        }
        ended = true;
      } catch {
        if (opts.signal.aborted) return;
      }
      opts.onState?.(false);
      // A run stream ends when the run is terminal: nothing more will come.
      if (ended && opts.reconnect === false) return;
      await new Promise((r) => setTimeout(r, backoff));
      backoff = Math.min(backoff * 2, 10_000);
    }
  };
  void run();
}

function parseBlock(block: string): SseFrame | undefined {
  let event = 'message';
  let id: string | undefined;
  const data: string[] = [];
  for (const line of block.split(/\r?\n/)) {
    if (line.startsWith(':')) continue;
    const i = line.indexOf(':');
    const field = i < 0 ? line : line.slice(0, i);
    const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
    if (field === 'event') event = value;
    else if (field === 'id') id = value;
    else if (field === 'data') data.push(value);
  }
  if (data.length === 0) return undefined;
  try {
    return { event, id, data: JSON.parse(data.join('\n')) };
  } catch {
    return undefined;
  }
}
