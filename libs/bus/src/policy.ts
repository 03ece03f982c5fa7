/**
 * Defaults and rules both adapters share, so the contract has one source:
 * consumer defaults, the backoff schedule, dead-letter naming and headers.
 */
import type { ConsumerSpec, StreamSpec, Subscription } from './types.js';

/** Where adapters report failures no caller sees (a pino logger fits). */
export interface BusLogger {
  warn(obj: object, msg: string): void;
}

export const DEFAULT_MAX_AGE_MS = 7 * 24 * 3600_000;
export const DEFAULT_DUPLICATE_WINDOW_MS = 2 * 60_000;
export const DEFAULT_REQUEST_TIMEOUT_MS = 5000;

/** Stream holding every dead letter; its subjects are `dlq.>`. */
export const DLQ_STREAM = 'DLQ';
export const DLQ_SUBJECTS = ['dlq.>'];

/** Header a responder's error reply carries; the body is JSON `{ message, code?, status? }`. */
export const ERROR_HEADER = 'Dws-Error';

/**
 * Request liveness. A request with `idleTimeoutMs` carries PROGRESS_EVERY_HEADER
 * (milliseconds); its responder, while the handler still runs, sends an empty
 * message with PROGRESS_HEADER on the reply subject that often. The requester
 * gives up when neither the answer nor a progress message came for idleTimeoutMs:
 * a dead responder process is told from a slow handler.
 */
export const PROGRESS_EVERY_HEADER = 'Dws-Progress-Every';
export const PROGRESS_HEADER = 'Dws-Progress';
/** Progress is never sent more often than this, whatever a requester asks. */
export const MIN_PROGRESS_MS = 50;

/**
 * How often a responder reports progress to a requester that allows idleTimeoutMs
 * of silence: three beats per window, so one lost or late beat is not a death.
 */
export function progressEveryMs(idleTimeoutMs: number): number {
  return Math.max(MIN_PROGRESS_MS, Math.floor(idleTimeoutMs / 3));
}

/** The progress period a request asked for (its header value), or undefined for none or garbage. */
export function parseProgressEvery(value: string | undefined): number | undefined {
  if (!value) return undefined;
  const ms = Number(value);
  return Number.isFinite(ms) && ms > 0 ? Math.max(MIN_PROGRESS_MS, Math.floor(ms)) : undefined;
}

/** Validate a request's idleTimeoutMs (undefined: no liveness check). */
export function checkIdleTimeout(idleTimeoutMs: number | undefined): number | undefined {
  if (idleTimeoutMs === undefined) return undefined;
  if (!Number.isFinite(idleTimeoutMs) || idleTimeoutMs < 2 * MIN_PROGRESS_MS) {
    throw new RangeError(`idleTimeoutMs must be a number of at least ${2 * MIN_PROGRESS_MS} ms, got ${idleTimeoutMs}`);
  }
  return idleTimeoutMs;
}

/** Header names the bus itself uses (and NATS does): never application headers. */
export const isBusHeader = (name: string): boolean => /^(dws|nats)-/i.test(name);

/** Validate a request's application headers (RequestOptions.headers). */
export function checkAppHeaders(headers: Readonly<Record<string, string>> | undefined): void {
  if (!headers) return;
  for (const name of Object.keys(headers)) {
    if (isBusHeader(name)) throw new RangeError(`request header '${name}' is reserved for the bus (Dws-*, Nats-*)`);
  }
}

/** Headers on a dead-lettered message. */
export const DLQ_HEADERS = {
  stream: 'Dws-Dlq-Stream',
  subject: 'Dws-Dlq-Subject',
  seq: 'Dws-Dlq-Seq',
  durable: 'Dws-Dlq-Durable',
  msgId: 'Dws-Dlq-Msg-Id',
  deliveries: 'Dws-Dlq-Deliveries',
  error: 'Dws-Dlq-Error',
} as const;

export interface ResolvedStream {
  name: string;
  subjects: string[];
  maxAgeMs: number;
  duplicateWindowMs: number;
}

export function resolveStream(spec: StreamSpec): ResolvedStream {
  const maxAgeMs = spec.maxAgeMs ?? DEFAULT_MAX_AGE_MS;
  return {
    name: spec.name,
    subjects: [...spec.subjects],
    maxAgeMs,
    // JetStream rejects a duplicate window longer than max age.
    duplicateWindowMs: Math.min(spec.duplicateWindowMs ?? DEFAULT_DUPLICATE_WINDOW_MS, maxAgeMs),
  };
}

export interface ResolvedConsumer {
  stream: string;
  durable: string;
  filterSubject: string | undefined;
  ackWaitMs: number;
  maxDeliver: number;
  backoffMs: number[];
  deadLetterSubject: string;
  concurrency: number;
}

export function resolveConsumer(spec: ConsumerSpec): ResolvedConsumer {
  return {
    stream: spec.stream,
    durable: spec.durable,
    filterSubject: spec.filterSubject,
    ackWaitMs: spec.ackWaitMs ?? 30_000,
    maxDeliver: Math.max(1, spec.maxDeliver ?? 10),
    backoffMs: spec.backoffMs ?? [250, 1000, 5000],
    deadLetterSubject: spec.deadLetterSubject ?? `dlq.${spec.stream}.${spec.durable}`,
    concurrency: Math.max(1, Math.floor(spec.concurrency ?? 1)),
  };
}

/** Delay before redelivering a message whose delivery `deliveryCount` failed (last entry repeats). */
export function backoffDelay(backoffMs: number[], deliveryCount: number): number {
  if (backoffMs.length === 0) return 0;
  const i = Math.min(Math.max(deliveryCount, 1), backoffMs.length) - 1;
  return Math.max(0, backoffMs[i] ?? 0);
}

/** The result a handler returned, when it asked for a retry. */
export function retryDelay(result: unknown): number | undefined {
  if (typeof result === 'object' && result !== null && 'retryInMs' in result) {
    const ms = (result as { retryInMs: unknown }).retryInMs;
    if (typeof ms === 'number' && Number.isFinite(ms)) return Math.max(0, ms);
  }
  return undefined;
}

/** What a responder's throw becomes on the wire (message plus the error's own code/status when present). */
export function errorPayload(err: unknown): { message: string; code?: string; status?: number } {
  const e = err as { message?: unknown; code?: unknown; status?: unknown } | null | undefined;
  const out: { message: string; code?: string; status?: number } = {
    message: typeof e?.message === 'string' ? e.message : String(err),
  };
  if (typeof e?.code === 'string') out.code = e.code;
  if (typeof e?.status === 'number') out.status = e.status;
  return out;
}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * A Subscription registered in `subs` until it is stopped; stopping twice
 * returns the same promise. Both adapters keep their live subscriptions this
 * way so close() can stop them all.
 */
export function trackSubscription(subs: Set<Subscription>, stop: () => Promise<void>): Subscription {
  let stopping: Promise<void> | undefined;
  const sub: Subscription = {
    stop: () => {
      stopping ??= stop().finally(() => subs.delete(sub));
      return stopping;
    },
  };
  subs.add(sub);
  return sub;
}
