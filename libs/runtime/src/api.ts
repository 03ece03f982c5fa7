import type { Bus, Subscription } from '@dws/bus';
import { ApiReplySchema, ApiRequestSchema, create, fromBinary, toBinary } from '@dws/proto';
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

/**
 * Answer the gateway's calls for `service`, dispatching on op. A thrown
 * ServiceError travels back as its code and status; anything else is logged
 * and answered as 500 `internal` (the cause never leaves the service).
 */
export function serveApi(bus: Bus, service: string, log: Logger, handlers: Record<string, ApiHandler>): Subscription {
  return bus.respond(apiSubject(service), service, async (data, _subject, headers) => {
    const req = fromBinary(ApiRequestSchema, data);
    const handler = handlers[req.op];
    try {
      if (!handler) throw new ServiceError(404, 'route_not_found', `Unknown operation ${req.op}.`);
      const parsed = req.body.length ? (JSON.parse(dec.decode(req.body)) as Omit<ApiCall, 'caller'>) : undefined;
      const result = await handler({
        caller: {
          workspaceId: req.workspaceId,
          actor: req.actor,
          keyKind: req.keyKind,
          requestId: req.requestId,
          suspended: req.suspended,
          via: VIAS.has(req.via) ? (req.via as Caller['via']) : 'api',
          ...(headers?.traceparent ? { traceparent: headers.traceparent } : {}),
        },
        params: parsed?.params ?? {},
        query: parsed?.query ?? {},
        body: parsed?.body,
      });
      return toBinary(
        ApiReplySchema,
        create(ApiReplySchema, {
          status: result.status ?? 200,
          body: result.body === undefined ? new Uint8Array() : enc.encode(JSON.stringify(result.body)),
          headers: result.headers ?? {},
        }),
      );
    } catch (err) {
      const known = isServiceError(err) && err.status < 600;
      if (!known) log.error({ err, op: req.op, requestId: req.requestId }, 'api call failed');
      return toBinary(
        ApiReplySchema,
        create(ApiReplySchema, {
          status: known ? err.status : 500,
          errorCode: known ? err.code : 'internal',
          errorMessage: known ? err.message : 'Internal error.',
        }),
      );
    }
  });
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

/**
 * Call `service` with `op`. The request JSON is assembled as text so a raw
 * request body is forwarded without re-serialising it. An error reply is
 * thrown as a ServiceError.
 */
export async function callApi(
  bus: Bus,
  service: string,
  op: string,
  caller: Caller,
  payload: { params?: Record<string, string>; query?: Record<string, unknown>; rawBody?: string },
  timeoutMs = 30_000,
): Promise<ApiResponse> {
  const json =
    `{"params":${JSON.stringify(payload.params ?? {})},"query":${JSON.stringify(payload.query ?? {})}` +
    (payload.rawBody !== undefined && payload.rawBody.length > 0 ? `,"body":${payload.rawBody}}` : '}');
  const req = create(ApiRequestSchema, {
    workspaceId: caller.workspaceId,
    actor: caller.actor,
    keyKind: caller.keyKind,
    requestId: caller.requestId,
    suspended: caller.suspended ?? false,
    via: caller.via ?? 'api',
    op,
    body: enc.encode(json),
  });
  const replyBytes = await bus.request(apiSubject(service), toBinary(ApiRequestSchema, req), {
    timeoutMs,
    idleTimeoutMs: API_SILENCE_MS,
    ...(caller.traceparent ? { headers: { traceparent: caller.traceparent } } : {}),
  });
  const reply = fromBinary(ApiReplySchema, replyBytes);
  if (reply.errorCode) throw new ServiceError(reply.status || 500, reply.errorCode, reply.errorMessage);
  return {
    status: reply.status || 200,
    bodyJson: reply.body.length ? dec.decode(reply.body) : undefined,
    headers: { ...reply.headers },
  };
}
