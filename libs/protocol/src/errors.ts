/**
 * The one error type every layer throws for an outcome the API answers with
 * a 4xx (or a deliberate 5xx). The HTTP middleware maps it to the error body
 * of CONTRACT.md: `{ "error": { "code", "message" } }`.
 *
 * Check `err.code`, never `instanceof`: jest module copies and the bus both
 * lose class identity.
 */
export class ServiceError extends Error {
  readonly code: string;
  readonly status: number;
  constructor(status: number, code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ServiceError';
    this.code = code;
    this.status = status;
  }
}

/** The shape a ServiceError takes on the wire (bus replies, HTTP bodies). */
export interface ErrorBody {
  error: { code: string; message: string };
}

export const invalid = (code: string, message: string): ServiceError => new ServiceError(400, code, message);
export const unauthorized = (message = 'A valid API key is required.'): ServiceError =>
  new ServiceError(401, 'unauthorized', message);
export const forbidden = (code: string, message: string): ServiceError => new ServiceError(403, code, message);
/** `notFound('run')` -> 404 `run_not_found`, "run not found". */
export const notFound = (what: string): ServiceError =>
  new ServiceError(404, `${what.replace(/[^a-z0-9]+/gi, '_').toLowerCase()}_not_found`, `${what} not found`);
export const conflict = (code: string, message: string): ServiceError => new ServiceError(409, code, message);
export const tooLarge = (message = 'Request body exceeds 1 MiB.'): ServiceError =>
  new ServiceError(413, 'payload_too_large', message);
export const unavailable = (code: string, message: string): ServiceError => new ServiceError(503, code, message);

/** True for anything carrying a ServiceError's fields (class identity is not relied on). */
export function isServiceError(err: unknown): err is ServiceError {
  return (
    typeof err === 'object' &&
    err !== null &&
    typeof (err as { code?: unknown }).code === 'string' &&
    typeof (err as { status?: unknown }).status === 'number'
  );
}

export function errorBody(code: string, message: string): ErrorBody {
  return { error: { code, message } };
}
