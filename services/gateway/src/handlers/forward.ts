import type { IncomingMessage } from 'node:http';
import type { z } from 'zod';
import type { Bus } from '@dws/bus';
import { describeStringProblem, findBadString } from '@dws/http';
import { forbidden, invalid, isServiceError, notFound, ServiceError } from '@dws/protocol';
import { callApi, type ApiBatcher, type ApiResponse } from '@dws/runtime';
import type { AuthedCaller } from './auth.js';
import { awaitNewRun } from './new-run.js';
import { endRequestSpan, startRequestSpan } from './request-trace.js';
import type { RouteSpec } from './route-table.js';

/**
 * The one path from an authenticated caller to a route of the table: the
 * REST router and the MCP tools both go through here, so the validation,
 * the suspension rule and the forwarding cannot differ between them.
 */

/** A route's input as it arrived: path parameters, query values, and the JSON body (its text kept to forward verbatim). */
export interface RouteInput {
  params: Record<string, string>;
  query: Record<string, unknown>;
  body?: { parsed: unknown; raw: string };
  /** The `Idempotency-Key` header, when the request had one. */
  idempotencyKey?: string;
}

/** The input after the route's schemas. */
export interface ValidInput {
  params: Record<string, string>;
  query: Record<string, unknown>;
  body: unknown;
  /** The request bytes of a body that passed its schema; forwarded as they came (no re-serialising). */
  rawBody: string | undefined;
  /** The headers the owning service reads (`idempotency-key` on a route that keeps it); undefined when none. */
  headers?: Record<string, string>;
}

/** Bus trouble is ours, not the caller's: 503 with the error body; the cause is logged by the error middleware. */
function unavailable(service: string, err: unknown): ServiceError {
  return new ServiceError(503, 'service_unavailable', `The ${service} service did not answer in time; retry shortly.`, { cause: err });
}

/** A zod failure as the error body: the code names the parameter (invalid_limit), the message says what is wrong. */
function validate<T extends z.ZodType>(schema: T, value: unknown, where: 'params' | 'query' | 'body', bodyCode: string): z.output<T> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const field = issue.path.map(String).join('.');
  // A path parameter that cannot be valid names nothing this workspace has.
  if (where === 'params') throw notFound(issue.path[0] === 'keyId' ? 'key' : 'resource');
  const code = where === 'query' ? `invalid_${String(issue.path[0] ?? 'query').toLowerCase()}` : bodyCode;
  throw invalid(code, `${where === 'query' ? `query parameter ${field}` : field ? `body.${field}` : 'body'}: ${issue.message}.`);
}

/**
 * Path and query strings Postgres could not hold (NUL, a lone surrogate from
 * a decoder that let one through) are refused here, before any schema or
 * service sees them; the body had the same check in jsonBody.
 */
function checkStrings(value: Record<string, unknown>, where: 'path parameter' | 'query parameter'): void {
  const bad = findBadString(value);
  if (bad) throw invalid('invalid_unicode', `${where} ${bad.path}: ${describeStringProblem(bad.problem)}.`.slice(0, 400));
}

/** A request's `Idempotency-Key` header (repeated headers joined, which the format then refuses). */
export function idempotencyKeyOf(req: IncomingMessage): string | undefined {
  const v = req.headers['idempotency-key'];
  return Array.isArray(v) ? v.join(', ') : v;
}

/**
 * Visible ASCII, as the IETF draft's Idempotency-Key (a structured-field string) allows; at most
 * 200 characters, so a batch event's `<key>:<i>` stays within SPEC's 256 for a dedupeId.
 */
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,200}$/;

/**
 * The headers a route forwards: its `Idempotency-Key` when it keeps one
 * (every route that starts runs does: route-table.test.ts); any other route
 * ignores it.
 */
function forwardedHeaders(r: RouteSpec, key: string | undefined): Record<string, string> | undefined {
  if (key === undefined || !r.idempotencyKey) return undefined;
  if (!IDEMPOTENCY_KEY.test(key)) throw invalid('invalid_idempotency_key', 'Idempotency-Key must be 1 to 200 visible ASCII characters.');
  return { 'idempotency-key': key };
}

/**
 * Validate params, query, body and Idempotency-Key with the route's schemas
 * (400, or 404 for a path parameter that cannot name anything), then refuse
 * a run-creating call of a suspended workspace (403, SPEC Errors).
 */
export function validateInput(r: RouteSpec, input: RouteInput, caller: AuthedCaller | undefined): ValidInput {
  const bodyCode = r.body?.errorCode ?? 'invalid_body';
  checkStrings(input.params, 'path parameter');
  checkStrings(input.query, 'query parameter');
  const params = r.params ? (validate(r.params, input.params, 'params', bodyCode) as Record<string, string>) : {};
  const query = r.query ? (validate(r.query, input.query, 'query', bodyCode) as Record<string, unknown>) : {};
  let body: unknown;
  if (r.body) {
    if (input.body) body = validate(r.body.schema, input.body.parsed, 'body', bodyCode);
    else if (r.body.required) throw invalid(bodyCode, 'A JSON body is required.');
  }
  const headers = forwardedHeaders(r, input.idempotencyKey);
  // SPEC Errors: a suspended workspace is refused every run-creating call (replay paths included).
  if (r.startsRuns && caller?.suspended) throw forbidden('workspace_suspended', 'This workspace is suspended: no new runs start.');
  return { params, query, body, rawBody: r.body && input.body ? input.body.raw : undefined, headers };
}

/**
 * How long a route naming a run born moments ago waits for it before its 404: its StartRun is a few
 * ms on its way. (Not longer: another workspace's run looks the same, and is answered 404 only then.)
 */
export const NEW_RUN_WAIT_MS = 1_000;

/** What forwarding needs: the bus, and the batches of the routes forwarded in batches. */
export interface Forwarding {
  bus: Bus;
  batcher: ApiBatcher;
}

/**
 * Call the service that owns a forwarded route with the caller (workspace,
 * actor, channel). A run announced moments ago is waited for briefly, not
 * 404; a bus failure is 503; a service's error reply is rethrown as is.
 */
export async function forwardRoute(to: Forwarding, r: RouteSpec, caller: AuthedCaller, v: ValidInput): Promise<ApiResponse> {
  if (r.target.kind !== 'forward') throw new Error(`route ${r.method} ${r.path} is not forwarded`);
  const { service, op } = r.target;
  const traced = startRequestSpan(r, caller);
  const as = traced?.caller ?? caller;
  const payload = { params: v.params, query: v.query, headers: v.headers, rawBody: v.rawBody };
  const call = () => (r.batched ? to.batcher.call(service, op, as, payload) : callApi(to.bus, service, op, as, payload));
  try {
    const res = r.namesRun ? await awaitNewRun(v.params.id ?? '', call, { waitMs: NEW_RUN_WAIT_MS }) : await call();
    if (traced) endRequestSpan(traced.span, res);
    return res;
  } catch (err) {
    const failed = isServiceError(err) ? err : unavailable(service, err);
    if (traced) endRequestSpan(traced.span, { error: failed });
    throw failed;
  }
}
