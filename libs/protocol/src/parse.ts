import {
  LOG_LEVELS,
  type InvokeContext,
  type InvokeRequestBody,
  type Memo,
  type MemoEntry,
  type Opcode,
  type RunnerLogLine,
  type StepError,
} from './wire.js';

// Structural checks for wire records that arrive from the other side of the
// protocol. They return values, never throw (STYLE: expected outcomes are
// values), and check shape only: semantics belong to the caller.

export type Parsed<T> = { ok: true; value: T } | { ok: false; message: string };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

const fail = (message: string): { ok: false; message: string } => ({ ok: false, message });

/** A StepError, or undefined when `v` is not one. Extra fields are dropped. */
export function parseStepError(v: unknown): StepError | undefined {
  if (!isObject(v) || typeof v.message !== 'string') return undefined;
  return typeof v.stack === 'string' ? { message: v.message, stack: v.stack } : { message: v.message };
}

/** A memo entry carrying exactly one of data, error or pending: true. */
export function parseMemoEntry(v: unknown): Parsed<MemoEntry> {
  if (!isObject(v)) return fail('memo entry is not an object');
  const kinds = ['data', 'error', 'pending'].filter((k) => k in v);
  if (kinds.length !== 1) return fail('memo entry must carry exactly one of data, error, pending');
  if ('data' in v) return { ok: true, value: { data: v.data } };
  if ('error' in v) {
    const error = parseStepError(v.error);
    return error ? { ok: true, value: { error } } : fail('memo entry error is not a StepError');
  }
  return v.pending === true ? { ok: true, value: { pending: true } } : fail('memo entry pending must be true');
}

function parseContext(v: unknown): Parsed<InvokeContext> {
  if (!isObject(v)) return fail('ctx is not an object');
  if (typeof v.workflow !== 'string' || v.workflow === '') return fail('ctx.workflow must be a non-empty string');
  if (typeof v.runId !== 'string') return fail('ctx.runId must be a string');
  if (typeof v.attempt !== 'number' || !Number.isInteger(v.attempt) || v.attempt < 0) {
    return fail('ctx.attempt must be a non-negative integer');
  }
  if (typeof v.app !== 'string') return fail('ctx.app must be a string');
  if (v.runner !== undefined && typeof v.runner !== 'string') return fail('ctx.runner must be a string');
  if (v.onFailure !== undefined && typeof v.onFailure !== 'boolean') return fail('ctx.onFailure must be a boolean');
  if (v.traceparent !== undefined && typeof v.traceparent !== 'string') return fail('ctx.traceparent must be a string');
  const ctx: InvokeContext = {
    runId: v.runId,
    workflow: v.workflow,
    attempt: v.attempt,
    app: v.app,
    runner: typeof v.runner === 'string' ? v.runner : '',
  };
  if (v.onFailure !== undefined) ctx.onFailure = v.onFailure;
  if (v.error !== undefined) {
    const error = parseStepError(v.error);
    if (!error) return fail('ctx.error is not a StepError');
    ctx.error = error;
  }
  if (v.traceparent !== undefined) ctx.traceparent = v.traceparent;
  if (typeof v.checkpoint === 'string' && v.checkpoint !== '') {
    ctx.checkpoint = v.checkpoint;
    if (typeof v.checkpointUrl === 'string' && /^https?:\/\//.test(v.checkpointUrl) && URL.canParse(v.checkpointUrl)) ctx.checkpointUrl = v.checkpointUrl;
    if (typeof v.checkpointSocket === 'string' && /^wss?:\/\//.test(v.checkpointSocket) && URL.canParse(v.checkpointSocket)) ctx.checkpointSocket = v.checkpointSocket;
  }
  return { ok: true, value: ctx };
}

/** Validates a parsed POST /invoke request body (runner side). */
export function parseInvokeRequestBody(v: unknown): Parsed<InvokeRequestBody> {
  if (!isObject(v)) return fail('invoke body is not an object');
  const event = v.event ?? { name: '', data: {} };
  if (!isObject(event)) return fail('event is not an object');
  if (event.name !== undefined && typeof event.name !== 'string') return fail('event.name must be a string');
  const steps = v.steps ?? {};
  if (!isObject(steps)) return fail('steps is not an object');
  const memo: Memo = {};
  for (const [key, raw] of Object.entries(steps)) {
    const entry = parseMemoEntry(raw);
    if (!entry.ok) return fail(`steps[${key}]: ${entry.message}`);
    memo[key] = entry.value;
  }
  const ctx = parseContext(v.ctx);
  if (!ctx.ok) return ctx;
  return {
    ok: true,
    value: {
      event: { name: typeof event.name === 'string' ? event.name : '', data: event.data ?? null },
      steps: memo,
      ctx: ctx.value,
    },
  };
}

function parseLogs(v: unknown): RunnerLogLine[] {
  if (!Array.isArray(v)) return [];
  // A malformed line is dropped rather than failing the whole reply.
  return v.filter(
    (l): l is RunnerLogLine =>
      isObject(l) &&
      (LOG_LEVELS as readonly unknown[]).includes(l.level) &&
      typeof l.message === 'string' &&
      typeof l.scope === 'string' &&
      typeof l.index === 'number' &&
      (l.fields === undefined || isObject(l.fields)),
  );
}

/** A runner reply, classified by status (SPEC Errors: invoke reply statuses). */
export type InvokeOutcome =
  | { kind: 'complete'; data: unknown; logs: RunnerLogLine[] }
  /** Opcodes with an unknown `op` are kept: SPEC fails that step, not the invoke. */
  | { kind: 'steps'; opcodes: Opcode[]; logs: RunnerLogLine[] }
  /** 4xx: non-retriable, fails the run. 5xx: retriable transport error. */
  | { kind: 'failed'; status: number; retriable: boolean; error?: StepError; logs: RunnerLogLine[] };

/**
 * Classifies a runner's reply to POST /invoke (service side). A body that
 * does not match its status is `{ ok: false }`: treat it like a transport
 * error.
 */
export function parseInvokeReply(status: number, body: unknown): Parsed<InvokeOutcome> {
  if (status === 200) {
    if (!isObject(body) || !('data' in body)) return fail('200 reply must be { data, logs }');
    return { ok: true, value: { kind: 'complete', data: body.data, logs: parseLogs(body.logs) } };
  }
  if (status === 206) {
    if (!isObject(body) || !Array.isArray(body.opcodes)) return fail('206 reply must be { opcodes, logs }');
    for (const op of body.opcodes) {
      if (!isObject(op) || typeof op.op !== 'string' || typeof op.id !== 'string' || typeof op.name !== 'string') {
        return fail('206 reply carries an opcode without string op, id and name');
      }
    }
    return { ok: true, value: { kind: 'steps', opcodes: body.opcodes as Opcode[], logs: parseLogs(body.logs) } };
  }
  if (status >= 400 && status <= 599) {
    const error = isObject(body) ? parseStepError(body.error) : undefined;
    const logs = isObject(body) ? parseLogs(body.logs) : [];
    const value: InvokeOutcome = { kind: 'failed', status, retriable: status >= 500, logs };
    if (error) value.error = error;
    return { ok: true, value };
  }
  return fail(`unexpected invoke reply status ${status}`);
}
