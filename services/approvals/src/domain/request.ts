import { checkCel, compileCel, fromCel } from '@dws/cel';

/** Risk levels in order: a `minRisk` floor gates a risk at or above it. */
export const RISK_ORDER = ['low', 'medium', 'high', 'critical'] as const;
export const ON_TIMEOUT = ['escalate', 'approve', 'reject', 'fail'] as const;
export const ALLOW = ['approve', 'edit', 'reject', 'respond'] as const;

export type OnTimeout = (typeof ON_TIMEOUT)[number];
export type AllowEntry = (typeof ALLOW)[number];

/** An Approval opcode the engine accepted (SPEC Opcode table, Approval rows). */
export interface ApprovalRequest {
  tool: string;
  /** The proposed args (the opcode's `data`); null when absent. */
  args: unknown;
  risk?: string;
  policy?: string;
  summary?: string;
  context?: unknown;
  escalatesTo?: string;
  onTimeout: OnTimeout;
  allow: AllowEntry[];
  timeoutMs?: number;
  ifExpr?: string;
  minRisk?: string;
  iteration: number;
}

export type Parsed = { ok: true; request: ApprovalRequest } | { ok: false; error: string };

const optString = (o: Record<string, unknown>, k: string): string | undefined | Error => {
  const v = o[k];
  if (v === undefined || v === null) return undefined;
  return typeof v === 'string' ? v : new Error(`Approval ${k} must be a string.`);
};

/**
 * Validate an Approval opcode once, where the hand-off arrives. Every
 * configuration the engine refuses is an error sentence: the step fails at
 * once with it (not retriable: the same opcode would be refused again).
 */
export function parseApprovalRequest(raw: unknown): Parsed {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return { ok: false, error: 'Approval opcode is not an object.' };
  const o = raw as Record<string, unknown>;
  if (typeof o.tool !== 'string' || o.tool.trim() === '') return { ok: false, error: 'Approval needs a tool: the name of the action awaiting sign-off.' };
  const strings: Record<string, string | undefined> = {};
  for (const k of ['risk', 'policy', 'summary', 'escalatesTo', 'if', 'minRisk']) {
    const v = optString(o, k);
    if (v instanceof Error) return { ok: false, error: v.message };
    strings[k] = v;
  }
  const onTimeout = o.onTimeout ?? 'escalate';
  if (!ON_TIMEOUT.includes(onTimeout as OnTimeout)) {
    return { ok: false, error: `Approval onTimeout ${JSON.stringify(onTimeout)} is not one of ${ON_TIMEOUT.join(', ')}.` };
  }
  let allow: AllowEntry[] = [...ALLOW];
  if (o.allow !== undefined && o.allow !== null) {
    if (!Array.isArray(o.allow) || o.allow.length === 0) return { ok: false, error: `Approval allow must be a non-empty array of ${ALLOW.join(', ')}.` };
    const bad = o.allow.find((a) => !ALLOW.includes(a as AllowEntry));
    if (bad !== undefined) return { ok: false, error: `Approval allow entry ${JSON.stringify(bad)} is not one of ${ALLOW.join(', ')}.` };
    allow = ALLOW.filter((a) => (o.allow as unknown[]).includes(a));
  }
  let timeoutMs: number | undefined;
  if (o.timeoutMs !== undefined && o.timeoutMs !== null) {
    if (typeof o.timeoutMs !== 'number' || !Number.isFinite(o.timeoutMs) || o.timeoutMs < 0) {
      return { ok: false, error: 'Approval timeoutMs must be a non-negative finite number of milliseconds.' };
    }
    timeoutMs = o.timeoutMs;
  }
  if (strings.minRisk !== undefined && !RISK_ORDER.includes(strings.minRisk as (typeof RISK_ORDER)[number])) {
    return { ok: false, error: `Approval minRisk ${JSON.stringify(strings.minRisk)} is not one of ${RISK_ORDER.join(', ')}.` };
  }
  let iteration = 0;
  if (o.iteration !== undefined && o.iteration !== null) {
    if (typeof o.iteration !== 'number' || !Number.isInteger(o.iteration) || o.iteration < 0) {
      return { ok: false, error: 'Approval iteration must be a non-negative integer.' };
    }
    iteration = o.iteration;
  }
  if (strings.if !== undefined) {
    const problem = checkCel(strings.if, { variables: CEL_VARS, type: 'bool' });
    if (problem) return { ok: false, error: `Approval if ${JSON.stringify(strings.if)} does not compile: ${problem}` };
  }
  return {
    ok: true,
    request: {
      tool: o.tool,
      args: o.data ?? null,
      risk: strings.risk,
      policy: strings.policy,
      summary: strings.summary,
      context: o.context ?? undefined,
      escalatesTo: strings.escalatesTo,
      onTimeout: onTimeout as OnTimeout,
      allow,
      timeoutMs,
      ifExpr: strings.if,
      minRisk: strings.minRisk,
      iteration,
    },
  };
}

const CEL_VARS = ['tool', 'args', 'risk', 'iteration'];

export type Gate = { ok: true; gated: boolean } | { ok: false; error: string };

/**
 * Whether the gate is raised: the `minRisk` floor AND the CEL `if`; both
 * absent always gates. A risk that is absent or outside the order under a
 * floor counts as gated (fail closed: an unknown risk is never waved
 * through). An `if` that throws or yields a non-bool is an error, not a
 * silent pass.
 */
export function evaluateGate(r: ApprovalRequest): Gate {
  let gated = true;
  if (r.minRisk !== undefined) {
    const floor = RISK_ORDER.indexOf(r.minRisk as (typeof RISK_ORDER)[number]);
    const level = r.risk === undefined ? -1 : RISK_ORDER.indexOf(r.risk as (typeof RISK_ORDER)[number]);
    gated = level === -1 || level >= floor;
  }
  if (r.ifExpr !== undefined) {
    const c = compileCel(r.ifExpr);
    if (!c.ok) return { ok: false, error: `Approval if ${JSON.stringify(r.ifExpr)} does not compile: ${c.error}` };
    let v: unknown;
    try {
      // iteration as a CEL int (BigInt), so `iteration > 2` compares ints.
      v = fromCel(c.program({ tool: r.tool, args: r.args, risk: r.risk ?? null, iteration: BigInt(r.iteration) }));
    } catch (err) {
      return { ok: false, error: `Approval if ${JSON.stringify(r.ifExpr)} could not be evaluated: ${firstLine((err as Error).message)}` };
    }
    if (typeof v !== 'boolean') return { ok: false, error: `Approval if ${JSON.stringify(r.ifExpr)} must evaluate to a bool, not ${JSON.stringify(v)}.` };
    gated = gated && v;
  }
  return { ok: true, gated };
}

const firstLine = (s: string): string => s.split('\n')[0]!.trim();
