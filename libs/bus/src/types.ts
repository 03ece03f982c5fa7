/**
 * The Bus port. Two adapters implement it with the same semantics: JetStream
 * (fleet mode) and an in-process embedded adapter (`pnpm dev`). One contract
 * suite (test/bus-contract.ts) runs against both.
 *
 * Three kinds of traffic:
 * - durable streams: publish is stored before it resolves; durable consumers
 *   share work by name, ack explicitly, get redeliveries with backoff, and a
 *   message that fails `maxDeliver` times goes to a dead-letter subject;
 * - request/reply: core request with a timeout (and optionally a liveness
 *   check: a long handler's responder reports progress); responders in one
 *   queue group share the load (one of them answers each request);
 * - ephemeral pub/sub: fire-and-forget fan-out for live tails.
 */

export interface StreamSpec {
  /** Stream name, UPPER_CASE (e.g. `SCHEDULER_CMDS`). */
  name: string;
  /** Subjects stored by the stream; `*` and `>` wildcards as in NATS. */
  subjects: string[];
  /** Drop messages older than this. @default 7 days */
  maxAgeMs?: number;
  /** Window in which a repeated `msgId` is dropped on publish. @default 2 minutes */
  duplicateWindowMs?: number;
}

export interface ConsumerSpec {
  stream: string;
  /** Durable name: every consumer started with the same name shares one cursor (a work group). */
  durable: string;
  /** Only messages on this subject (wildcards allowed). One filter: nats-server 2.9 has no multi-filter. */
  filterSubject?: string;
  /** An unacked message is redelivered after this. @default 30000 */
  ackWaitMs?: number;
  /** Deliveries before the message is dead-lettered. @default 10 */
  maxDeliver?: number;
  /** Delay before redelivery n (1-based index into the list, last entry repeats) after a failure. @default [250, 1000, 5000] */
  backoffMs?: number[];
  /** Where a message goes after `maxDeliver` failures. @default `dlq.<stream>.<durable>` */
  deadLetterSubject?: string;
  /** Handlers running at once in this process. With 1, messages are handled in stream order. @default 1 */
  concurrency?: number;
}

export interface BusMessage {
  readonly subject: string;
  readonly data: Uint8Array;
  /** Stream sequence: unique and increasing per stream. */
  readonly seq: number;
  /** The id given at publish (`msgId`), when one was. */
  readonly msgId: string | undefined;
  /** 1 on the first delivery. */
  readonly deliveryCount: number;
  /**
   * Headers set by the bus itself; today only on dead-lettered messages (`Dws-Dlq-*`:
   * original stream, subject, seq, durable, msg id, deliveries, error). Absent otherwise.
   */
  readonly headers?: Readonly<Record<string, string>>;
  /** Reset the ack deadline while a long handler is still working. */
  working(): void;
}

/**
 * A consumer's handler. Resolving acks the message; throwing redelivers it
 * after the backoff (or dead-letters it once `maxDeliver` is reached).
 * Return `{ retryInMs }` to ask for a redelivery without counting it as a failure of the code.
 *
 * Precisely (both adapters): a throw dead-letters when the delivery that threw has
 * `deliveryCount >= maxDeliver`; `{ retryInMs }` never dead-letters, but a retry is
 * still a delivery (JetStream counts every redelivery and a nak cannot reset it), so
 * after many retries a single throw dead-letters at once. A delivery whose ack wait
 * expires is redelivered without limit (no decision was made, so nothing is dropped).
 */
export type MessageHandler = (msg: BusMessage) => Promise<void | { retryInMs: number }>;

/**
 * Answers one request. `headers` are the application headers the requester
 * set (`RequestOptions.headers`; the bus's own are not among them), absent
 * when it set none.
 */
export type RequestHandler = (data: Uint8Array, subject: string, headers?: Readonly<Record<string, string>>) => Promise<Uint8Array>;
export type EventHandler = (data: Uint8Array, subject: string) => void;

export interface Subscription {
  /** Stop taking new messages and wait for in-flight handlers to finish. */
  stop(): Promise<void>;
}

export interface PublishOptions {
  /** Deduplication id: a repeat within the stream's duplicate window is dropped. */
  msgId?: string;
}

export interface RequestOptions {
  /** Upper bound on the whole request, however busy the responder keeps saying it is. @default 5000 */
  timeoutMs?: number;
  /**
   * Liveness: reject with a BusError `timeout` ("the responder went silent") as soon as
   * neither the answer nor a progress message arrived for this long. A responder whose
   * handler is still running reports progress every `idleTimeoutMs / 3` (asked for by
   * the request), so a long handler keeps its full `timeoutMs` while a responder whose
   * process died, or whose connection was cut, is given up on within about
   * `idleTimeoutMs`. At least 100. Progress costs nothing for a handler that answers
   * within that period. In the embedded adapter the responder is in the requester's
   * own process, so it cannot die alone: only `timeoutMs` can fire there.
   * @default none: only `timeoutMs`
   */
  idleTimeoutMs?: number;
  /**
   * Application headers handed to the responder's handler (W3C `traceparent`,
   * for one). Names starting with `Dws-` or `Nats-` are the bus's own and
   * are refused. @default none
   */
  headers?: Readonly<Record<string, string>>;
}

export interface Bus {
  readonly kind: 'jetstream' | 'embedded';
  /** Create or update a stream. Idempotent: safe on every start, from every replica. */
  ensureStream(spec: StreamSpec): Promise<void>;
  /** Durable publish: resolves once the message is stored. Rejects with `no_responders` when no stream stores `subject`. */
  publish(subject: string, data: Uint8Array, opts?: PublishOptions): Promise<void>;
  /** Start (or join) a durable consumer. Creates it idempotently. */
  consume(spec: ConsumerSpec, handler: MessageHandler): Promise<Subscription>;
  /**
   * Core request/reply. Rejects with a BusError `timeout` (no answer within `timeoutMs`, or
   * with `idleTimeoutMs` a responder that went silent) or `no_responders`.
   */
  request(subject: string, data: Uint8Array, opts?: RequestOptions): Promise<Uint8Array>;
  /** Answer requests on `subject`; responders sharing `queueGroup` split the load. A throw answers with an error. */
  respond(subject: string, queueGroup: string, handler: RequestHandler): Subscription;
  /** Fire-and-forget fan-out (live tails). Not stored. */
  emit(subject: string, data: Uint8Array): void;
  /** Receive `emit`s; wildcards allowed. Every subscriber gets every message. */
  subscribe(subject: string, handler: EventHandler): Subscription;
  /** True while the connection is usable (for /readyz). */
  healthy(): Promise<boolean>;
  /** How far behind each durable this process consumes is (for /metrics): stream names as given to `consume`. */
  backlog(): Promise<ConsumerBacklog[]>;
  /** Stop every subscription (draining in-flight handlers), then disconnect. */
  close(): Promise<void>;
}

/** One durable consumer's lag, as the stream sees it (shared by its whole work group). */
export interface ConsumerBacklog {
  stream: string;
  durable: string;
  /** Messages stored for it and not yet delivered. */
  pending: number;
  /** Messages delivered and not yet acknowledged (in flight, or waiting for a redelivery). */
  ackPending: number;
}

export type BusErrorCode = 'timeout' | 'no_responders' | 'closed' | 'remote';

/**
 * Errors the bus itself raises. `remote` carries a responder's thrown error message,
 * and in `remote` the thrown error's own string `code` / numeric `status` when it had them
 * (so a caller can rethrow a ServiceError without the bus knowing that type).
 */
export class BusError extends Error {
  readonly code: BusErrorCode;
  readonly remote: { code?: string; status?: number } | undefined;
  constructor(code: BusErrorCode, message: string, remote?: { code?: string; status?: number }) {
    super(message);
    this.name = 'BusError';
    this.code = code;
    this.remote = remote;
  }
}
