import type { ApprovalDecisionKind, ApprovalOnTimeout, ApprovalOpcode } from '@dws/protocol';
import { toMs } from './duration.js';
import { normalise } from './json.js';
import type { ApprovalDecision, ApprovalOptions, ApprovalRisk } from './types.js';

/** The risk order `minRisk` compares against, lowest first (the approvals service uses the same). */
export const APPROVAL_RISKS: readonly ApprovalRisk[] = ['low', 'medium', 'high', 'critical'];
const ON_TIMEOUT: readonly ApprovalOnTimeout[] = ['escalate', 'approve', 'reject', 'fail'];
const ALLOW: readonly ApprovalDecisionKind[] = ['approve', 'edit', 'reject', 'respond'];

/** SPEC Limits: names and ids are at most 256 characters (the tool is a name). */
const NAME_MAX = 256;

const text = (v: unknown, what: string, max = Number.POSITIVE_INFINITY): string => {
  if (typeof v !== 'string' || v.trim() === '') throw new TypeError(`${what} must be a non-empty string`);
  if (v.length > max) throw new TypeError(`${what} is over ${max} characters`);
  return v;
};

const oneOf = <T extends string>(v: unknown, allowed: readonly T[], what: string): T => {
  if (!allowed.includes(v as T)) throw new TypeError(`${what} must be one of ${allowed.join(', ')}, got ${JSON.stringify(v)}`);
  return v as T;
};

/**
 * The Approval opcode of `step.approval(id, options)`, without id and name.
 * Checks locally what the approvals service would refuse anyway (tool,
 * onTimeout, minRisk, allow, iteration, timeout), so the mistake surfaces
 * with the call site's label; the CEL `if` is compiled by the service only.
 *
 * @throws TypeError naming the option (the step then rejects, not retriable).
 */
export function approvalOpcode(options: ApprovalOptions, what: string): Omit<ApprovalOpcode, 'id' | 'name'> {
  if (typeof options !== 'object' || options === null) throw new TypeError(`${what} needs { tool, args }`);
  const op: Omit<ApprovalOpcode, 'id' | 'name'> = {
    op: 'Approval',
    tool: text(options.tool, `${what}.tool`, NAME_MAX),
    data: normalise(options.args ?? null, `args of ${what}`).value,
  };
  // Absent, not 0: a timeoutMs of 0 is a deadline that passes at once.
  if (options.timeout !== undefined) op.timeoutMs = toMs(options.timeout, `${what}.timeout`);
  for (const k of ['risk', 'policy', 'summary', 'context', 'escalatesTo', 'if'] as const) {
    if (options[k] !== undefined) op[k] = text(options[k], `${what}.${k}`);
  }
  if (options.minRisk !== undefined) op.minRisk = oneOf(options.minRisk, APPROVAL_RISKS, `${what}.minRisk`);
  if (options.onTimeout !== undefined) op.onTimeout = oneOf(options.onTimeout, ON_TIMEOUT, `${what}.onTimeout`);
  if (options.allow !== undefined) {
    if (!Array.isArray(options.allow) || options.allow.length === 0) {
      throw new TypeError(`${what}.allow must be a non-empty array of ${ALLOW.join(', ')}`);
    }
    // Deduplicated, in the canonical order: the same decisions always read the same.
    const given = options.allow.map((a, i) => oneOf(a, ALLOW, `${what}.allow[${i}]`));
    op.allow = ALLOW.filter((a) => given.includes(a));
  }
  if (options.iteration !== undefined) {
    if (!Number.isInteger(options.iteration) || options.iteration < 0) {
      throw new TypeError(`${what}.iteration must be a non-negative integer, got ${String(options.iteration)}`);
    }
    op.iteration = options.iteration;
  }
  return op;
}

/**
 * The `minRisk` half of the gate rule, as the approvals service applies it:
 * gated at or above the floor, and gated when the risk is absent or outside
 * the order (fail closed). No floor: gated. The CEL `if` half is the
 * service's (testWorkflow scripts it).
 */
export function gatedByRisk(op: Pick<ApprovalOpcode, 'risk' | 'minRisk'>): boolean {
  if (op.minRisk === undefined) return true;
  const level = op.risk === undefined ? -1 : APPROVAL_RISKS.indexOf(op.risk as ApprovalRisk);
  return level === -1 || level >= APPROVAL_RISKS.indexOf(op.minRisk as ApprovalRisk);
}

/** The result of an approval the gate rule waved through: the proposed args, approved. */
export const notGated = <A>(args: A): ApprovalDecision<A> => ({ gated: false, status: 'approved', args });
