import { BusError, type Bus, type Subscription } from '@dws/bus';
import { ApiBatchReplySchema, ApiBatchRequestSchema, ApiReplySchema, ApiRequestSchema, create, fromBinary, toBinary, type ApiReply, type ApiRequest } from '@dws/proto';
import { histogram } from './metrics.js';
import { TurnBatcher } from './turn-batcher.js';
import { isServiceError, ServiceError } from '@dws/protocol';
import type { Logger } from '@dws/log';

/** Who is calling, as the gateway authenticated it. */
export interface Caller {
  workspaceId: string;
  /** Label for audit entries: the key's name, or X-Service-Actor on a console key. */
  actor: string;
  keyKind: string;
  requestId: string;
  /** The workspace is suspended (SPEC Errors): set by the gateway, read by ingest. @default false */
  suspended?: boolean;
  /** How the caller reached the API (SPEC Approval decidedVia), set by the gateway. @default 'api' */
  via?: 'api' | 'mcp' | 'console' | 'unrecorded';
  /**
   * W3C trace context of the request, when it came with one (the gateway
   * copies the HTTP `traceparent` header): rides the bus as a header, so
   * the owning service's spans continue the caller's trace. @default none
   */
  traceparent?: string;
}

const VIAS = new Set(['api', 'mcp', 'console', 'unrecorded']);

/** A public API call forwarded by the gateway to the service that owns the data. */
export interface ApiCall<B = unknown> {
  caller: Caller;
  params: Record<string, string>;
  query: Record<string, unknown>;
  body: B;
  /** The request headers a route passes on (lower-case names), such as `idempotency-key`. */
  headers: Record<string, string>;
}

/** A handler's answer: its JSON body, with an optional status (default 200) and headers. */
export interface ApiResult {
  status?: number;
  body?: unknown;
  headers?: Record<string, string>;
}

export type ApiHandler = (call: ApiCall) => Promise<ApiResult>;

/** Subject on which a service answers the gateway; replicas share it in one queue group. */
export const apiSubject = (service: string): string => `svc.${service}.api`;

const enc = new TextEncoder();
const dec = new TextDecoder();

/** Subject on which a service answers the gateway's batches of calls (ApiBatchRequest), beside apiSubject. */
export const apiBatchSubject = (service: string): string => `svc.${service}.api.batch`;

/**
 * An op's handler for its calls of one batch taken together: one outcome
 * per call, in order (a call's failure is its own rejected entry). For an op
 * whose calls cost more apart than together (events.ingest: one ingest, one
 * transaction's worth of work, for the events of many POSTs).
 */
export type ApiBatchHandler = (calls: ApiCall[]) => Promise<PromiseSettledResult<ApiResult>[]>;

/**
 * Answer the gateway's calls for `service`, dispatching on op, one at a time
 * on apiSubject and in batches on apiBatchSubject: each call of a batch runs
 * as it would alone, all at once, and gets its own reply; the calls of an
 * op with a handler in `together` go to it in one call. A thrown
 * ServiceError travels back as its code and status; anything else is logged
 * and answered as 500 `internal` (the cause never leaves the service).
 */
export function serveApi(
  bus: Bus,
  service: string,
  log: Logger,
  handlers: Record<string, ApiHandler>,
  together: Record<string, ApiBatchHandler> = {},
): Subscription {
  const callOf = (req: ApiRequest, traceparent: string | undefined): ApiCall => {
    if (!handlers[req.op]) throw new ServiceError(404, 'route_not_found', `Unknown operation ${req.op}.`);
    const parsed = req.body.length ? (JSON.parse(dec.decode(req.body)) as Omit<ApiCall, 'caller'>) : undefined;
    return {
      caller: {
        workspaceId: req.workspaceId,
        actor: req.actor,
        keyKind: req.keyKind,
        requestId: req.requestId,
        suspended: req.suspended,
        via: VIAS.has(req.via) ? (req.via as Caller['via']) : 'api',
        ...(traceparent ? { traceparent } : {}),
      },
      params: parsed?.params ?? {},
      query: parsed?.query ?? {},
      body: parsed?.body,
      headers: parsed?.headers ?? {},
    };
  };
  const replyOf = (req: ApiRequest, outcome: PromiseSettledResult<ApiResult>): ApiReply => {
    if (outcome.status === 'fulfilled') {
      const result = outcome.value;
      return create(ApiReplySchema, {
        status: result.status ?? 200,
        body: result.body === undefined ? new Uint8Array() : enc.encode(JSON.stringify(result.body)),
        headers: result.headers ?? {},
      });
    }
    const err = outcome.reason as unknown;
    const known = isServiceError(err) && err.status < 600;
    if (!known) log.error({ err, op: req.op, requestId: req.requestId }, 'api call failed');
    return create(ApiReplySchema, {
      status: known ? err.status : 500,
      errorCode: known ? err.code : 'internal',
      errorMessage: known ? err.message : 'Internal error.',
    });
  };
  const answer = async (req: ApiRequest, traceparent: string | undefined): Promise<ApiReply> => {
    try {
      return replyOf(req, { status: 'fulfilled', value: await handlers[req.op]!(callOf(req, traceparent)) });
    } catch (reason) {
      return replyOf(req, { status: 'rejected', reason });
    }
  };
  /** The calls of one op taken together: each call that parses goes to its batch handler, in one call. */
  const answerTogether = async (op: string, reqs: ApiRequest[]): Promise<ApiReply[]> => {
    const replies: ApiReply[] = [];
    const calls: { at: number; call: ApiCall }[] = [];
    reqs.forEach((req, at) => {
      try {
        calls.push({ at, call: callOf(req, req.traceparent || undefined) });
      } catch (reason) {
        replies[at] = replyOf(req, { status: 'rejected', reason });
      }
    });
    let outcomes: PromiseSettledResult<ApiResult>[];
    try {
      outcomes = await together[op]!(calls.map((c) => c.call));
    } catch (reason) {
      outcomes = calls.map(() => ({ status: 'rejected', reason }));
    }
    calls.forEach((c, k) => (replies[c.at] = replyOf(reqs[c.at]!, outcomes[k]!)));
    return replies;
  };
  const one = bus.respond(apiSubject(service), service, async (data, _subject, headers) =>
    toBinary(ApiReplySchema, await answer(fromBinary(ApiRequestSchema, data), headers?.traceparent)),
  );
  const many = bus.respond(apiBatchSubject(service), service, async (data) => {
    const { calls } = fromBinary(ApiBatchRequestSchema, data);
    const replies: ApiReply[] = [];
    const byOp = new Map<string, number[]>();
    const alone: Promise<unknown>[] = [];
    calls.forEach((req, i) => {
      if (together[req.op] && handlers[req.op]) {
        const at = byOp.get(req.op);
        if (at) at.push(i);
        else byOp.set(req.op, [i]);
      } else alone.push(answer(req, req.traceparent || undefined).then((r) => (replies[i] = r)));
    });
    const joint = [...byOp].map(async ([op, at]) => {
      const out = await answerTogether(op, at.map((i) => calls[i]!));
      at.forEach((i, k) => (replies[i] = out[k]!));
    });
    await Promise.all([...alone, ...joint]);
    return toBinary(ApiBatchReplySchema, create(ApiBatchReplySchema, { replies }));
  });
  return {
    async stop() {
      await Promise.all([one.stop(), many.stop()]);
    },
  };
}

/** What a call sends: path parameters, query, the headers its route passes on, and the request body as the raw JSON text it came in. */
export interface ApiPayload {
  params?: Record<string, string>;
  query?: Record<string, unknown>;
  headers?: Record<string, string>;
  rawBody?: string;
}

export interface ApiResponse {
  status: number;
  /** JSON text of the body, not parsed: the gateway passes it through. */
  bodyJson: string | undefined;
  headers: Record<string, string>;
}

/**
 * How long a call may go without a word from the service (its answer, or the
 * bus's progress while a long handler runs) before it fails: a service
 * SIGKILLed mid-call costs its callers seconds, not the whole `timeoutMs`.
 */
export const API_SILENCE_MS = 5000;

/** A call's message: the request JSON assembled as text, so a raw request body is forwarded without re-serialising it. */
function requestOf(op: string, caller: Caller, payload: ApiPayload): ApiRequest {
  const json =
    `{"params":${JSON.stringify(payload.params ?? {})},"query":${JSON.stringify(payload.query ?? {})}` +
    (payload.headers !== undefined ? `,"headers":${JSON.stringify(payload.headers)}` : '') +
    (payload.rawBody !== undefined && payload.rawBody.length > 0 ? `,"body":${payload.rawBody}}` : '}');
  return create(ApiRequestSchema, {
    workspaceId: caller.workspaceId,
    actor: caller.actor,
    keyKind: caller.keyKind,
    requestId: caller.requestId,
    suspended: caller.suspended ?? false,
    via: caller.via ?? 'api',
    op,
    body: enc.encode(json),
    traceparent: caller.traceparent ?? '',
  });
}

/** An answer as the gateway passes it on; an error reply is thrown as a ServiceError. */
function responseOf(reply: ApiReply): ApiResponse {
  if (reply.errorCode) throw new ServiceError(reply.status || 500, reply.errorCode, reply.errorMessage);
  return {
    status: reply.status || 200,
    bodyJson: reply.body.length ? dec.decode(reply.body) : undefined,
    headers: { ...reply.headers },
  };
}

/** One call on apiSubject; its trace context rides as the message's header, as services of every version read it. */
async function requestOne(bus: Bus, service: string, req: ApiRequest, timeoutMs: number): Promise<ApiReply> {
  const replyBytes = await bus.request(apiSubject(service), toBinary(ApiRequestSchema, req), {
    timeoutMs,
    idleTimeoutMs: API_SILENCE_MS,
    ...(req.traceparent ? { headers: { traceparent: req.traceparent } } : {}),
  });
  return fromBinary(ApiReplySchema, replyBytes);
}

/** Call `service` with `op`. An error reply is thrown as a ServiceError. */
export async function callApi(bus: Bus, service: string, op: string, caller: Caller, payload: ApiPayload, timeoutMs = 30_000): Promise<ApiResponse> {
  return responseOf(await requestOne(bus, service, requestOf(op, caller, payload), timeoutMs));
}

/** Calls per batch, and the request bytes one batch carries (a larger call goes alone). */
const BATCH_MAX_CALLS = 64;
const BATCH_MAX_BYTES = 256 * 1024;
/** How long a service without a batch subject (an older one, mid-upgrade) is called one call at a time before trying again. */
const SINGLE_FOR_MS = 60_000;
const BATCH_TIMEOUT_MS = 30_000;
const batchCalls = histogram('dws_api_batch_calls', 'Calls per bus request of the batched routes (1: a call on its own), by service.', [1, 2, 4, 8, 16, 32, 64]);

/**
 * Calls to services in batches (TurnBatcher, per service): the calls that
 * arrive in one event-loop turn, or while the service's previous batches
 * are in flight, go in one ApiBatchRequest on apiBatchSubject, and each gets
 * its own answer, as alone. A call in a quiet moment goes at once, on its
 * own. For the gateway's busiest route (POST /events one at a time from many
 * clients), where each call's message, dispatch and reply cost the bus and
 * the service more than its event: W5 in docs/profiles.md. A batch is
 * answered when its last call is: calls that can wait on a lock (an
 * event's dedupe id) may hold back the others of their batch that long.
 */
export class ApiBatcher {
  private readonly singleUntil = new Map<string, number>();
  private readonly batches = new TurnBatcher<ApiRequest, ApiReply | { failed: unknown }>((service, reqs) => this.send(service, reqs), {
    maxItems: BATCH_MAX_CALLS,
    weigh: (req) => req.body.length,
    maxWeight: BATCH_MAX_BYTES,
  });

  constructor(private readonly bus: Bus) {}

  /** As callApi, in a batch when others are being called at the same time. */
  async call(service: string, op: string, caller: Caller, payload: ApiPayload): Promise<ApiResponse> {
    const reply = await this.batches.add(service, requestOf(op, caller, payload));
    if ('failed' in reply) throw reply.failed;
    return responseOf(reply);
  }

  private async send(service: string, reqs: ApiRequest[]): Promise<(ApiReply | { failed: unknown })[]> {
    batchCalls.observe(reqs.length, { service });
    // One at a time, each call's bus failure is its own.
    const alone = () => Promise.all(reqs.map((req) => requestOne(this.bus, service, req, BATCH_TIMEOUT_MS).catch((failed: unknown) => ({ failed }))));
    if (reqs.length === 1 || Date.now() < (this.singleUntil.get(service) ?? 0)) return alone();
    let bytes: Uint8Array;
    try {
      bytes = await this.bus.request(apiBatchSubject(service), toBinary(ApiBatchRequestSchema, create(ApiBatchRequestSchema, { calls: reqs })), {
        timeoutMs: BATCH_TIMEOUT_MS,
        idleTimeoutMs: API_SILENCE_MS,
      });
    } catch (err) {
      if (!(err instanceof BusError && err.code === 'no_responders')) throw err;
      // Nobody on the batch subject: an older service (or none at all, which the single calls will say).
      this.singleUntil.set(service, Date.now() + SINGLE_FOR_MS);
      return alone();
    }
    const { replies } = fromBinary(ApiBatchReplySchema, bytes);
    if (replies.length !== reqs.length) throw new Error(`${service} answered ${replies.length} of a batch of ${reqs.length} calls`);
    return replies;
  }
}
