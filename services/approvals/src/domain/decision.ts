import { conflict, invalid } from '@dws/protocol';
import type { AllowEntry, OnTimeout } from './request.js';

export const STATUSES = ['pending', 'escalated', 'approved', 'denied', 'cancelled'] as const;
export type ApprovalStatus = (typeof STATUSES)[number];
export type DecidedVia = 'console' | 'mcp' | 'api' | 'timeout' | 'unrecorded';

/** SPEC Approval rule 1: pending and escalated await a decision. */
export const isOpen = (status: string): boolean => status === 'pending' || status === 'escalated';

/** The parts of an approval a decision reads. */
export interface OpenApproval {
  id: string;
  tool: string;
  args: unknown;
  status: string;
  allow: AllowEntry[];
  onTimeout: OnTimeout;
}

/** A decision the API accepted. `editedArgs` is present only on an approve with args. */
export interface Verdict {
  status: 'approved' | 'denied';
  edited: boolean;
  editedArgs?: unknown;
  response?: string;
}

/**
 * Check a decision body against the approval (SPEC Approval statuses, the
 * `allow` list): 400 `invalid_decision` for a body the approval does not
 * offer, 409 `approval_not_open` once it is decided or cancelled. Body
 * fields decidedBy / decidedVia are ignored: the caller decides them.
 */
export function checkDecision(a: OpenApproval, body: unknown): Verdict {
  const b = (body && typeof body === 'object' && !Array.isArray(body) ? body : {}) as Record<string, unknown>;
  if (b.status !== 'approved' && b.status !== 'denied') throw invalid('invalid_decision', 'status must be approved or denied.');
  if (b.response !== undefined && b.response !== null && typeof b.response !== 'string') throw invalid('invalid_decision', 'response must be a string.');
  if (!isOpen(a.status)) throw conflict('approval_not_open', `Approval ${a.id} is ${a.status}, no longer open.`);
  const edited = b.args !== undefined;
  const response = typeof b.response === 'string' ? b.response : undefined;
  if (b.status === 'approved' && !a.allow.includes('approve')) throw invalid('invalid_decision', `Approval ${a.id} does not offer approve (allow: ${a.allow.join(', ')}).`);
  if (b.status === 'denied' && !a.allow.includes('reject')) throw invalid('invalid_decision', `Approval ${a.id} does not offer reject (allow: ${a.allow.join(', ')}).`);
  if (edited && b.status === 'denied') throw invalid('invalid_decision', 'args replace the proposed arguments of an approve; a denial takes none.');
  if (edited && !a.allow.includes('edit')) throw invalid('invalid_decision', `Approval ${a.id} does not offer edit: approve without args.`);
  if (response !== undefined && !a.allow.includes('respond')) throw invalid('invalid_decision', `Approval ${a.id} does not offer respond: send no response.`);
  return { status: b.status, edited, ...(edited ? { editedArgs: b.args } : {}), ...(response !== undefined ? { response } : {}) };
}

/** The memo the workflow receives for an approval the gate did not raise. */
export const notGatedResult = (args: unknown) => ({ gated: false, status: 'approved', args });

/** The memo the workflow receives for a decided approval: the effective args are the edit, when one was made. */
export function decidedResult(a: { id: string; args: unknown }, v: Verdict, by: string, via: DecidedVia) {
  return {
    gated: true,
    approvalId: a.id,
    status: v.status,
    args: v.edited ? v.editedArgs : a.args,
    decidedBy: by,
    decidedVia: via,
    ...(v.response !== undefined ? { response: v.response } : {}),
  };
}

export const TIMEOUT_ACTOR = 'system:timeout';

/** What `expiresAt` does to a pending approval (SPEC Approval statuses). */
export type Expiry =
  /** Still decidable, no further timer; escalatesTo is the target. */
  | { kind: 'escalate' }
  /** Decided by the timeout: approve -> approved, reject -> denied. */
  | { kind: 'decide'; verdict: Verdict }
  /** Cancelled without a decision; the step fails with `error`. */
  | { kind: 'fail'; error: string };

export function onExpiry(a: { id: string; tool: string; onTimeout: OnTimeout }): Expiry {
  switch (a.onTimeout) {
    case 'escalate':
      return { kind: 'escalate' };
    case 'approve':
      return { kind: 'decide', verdict: { status: 'approved', edited: false } };
    case 'reject':
      return { kind: 'decide', verdict: { status: 'denied', edited: false } };
    case 'fail':
      return { kind: 'fail', error: `Approval ${a.id} (${a.tool}) timed out: onTimeout is fail.` };
  }
}
