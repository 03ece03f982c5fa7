import type { ApprovalOpcode, MemoEntry } from '@dws/protocol';
import { gatedByRisk, notGated } from './approval.js';
import { normalise } from './json.js';
import type { ApprovalDecidedVia, ApprovalDecision } from './types.js';

/** What a scripted approval sees: the step's name and the opcode's fields, its `data` as `args`. */
export interface ApprovalTestRequest {
  /** Step name (`gate`, `gate:1`). */
  name: string;
  tool: string;
  /** The proposed args. */
  args: unknown;
  risk?: string;
  minRisk?: string;
  if?: string;
  iteration: number;
  onTimeout: NonNullable<ApprovalOpcode['onTimeout']>;
  allow: NonNullable<ApprovalOpcode['allow']>;
  timeoutMs?: number;
  policy?: string;
  summary?: string;
  context?: string;
  escalatesTo?: string;
}

/**
 * A scripted outcome of one `step.approval` in `testWorkflow`:
 * - a decision `{ status, args?, response?, decidedBy?, decidedVia? }`
 *   (`args` is an approve-with-edits; the helper refuses what the service
 *   would answer 400, e.g. args when `allow` lacks `edit`);
 * - `{ gated: false }`: the step's `if` waved the call through (the helper
 *   does not evaluate CEL; `minRisk` it applies itself);
 * - `{ timedOut: true }`: the deadline passed and `onTimeout` acts
 *   (approve / reject decide as `system:timeout`, fail fails the step).
 */
export type ApprovalScript =
  | { status: 'approved' | 'denied'; args?: unknown; response?: string; decidedBy?: string; decidedVia?: ApprovalDecidedVia }
  | { gated: false }
  | { timedOut: true };

/** `approvals` of testWorkflow: per step name a script or a function of the request, or one function for every approval. */
export type ApprovalScripts =
  | Record<string, ApprovalScript | ((request: ApprovalTestRequest) => ApprovalScript)>
  | ((request: ApprovalTestRequest) => ApprovalScript | undefined);

const ALL_DECISIONS: ApprovalTestRequest['allow'] = ['approve', 'edit', 'reject', 'respond'];

function requestOf(op: ApprovalOpcode): ApprovalTestRequest {
  const { op: _op, id: _id, data, iteration, onTimeout, allow, ...rest } = op;
  return { ...rest, args: data, iteration: iteration ?? 0, onTimeout: onTimeout ?? 'escalate', allow: allow ?? ALL_DECISIONS };
}

/**
 * The memo entry the approvals service would record for `op` under
 * `scripts`: the gate rule first (`minRisk`), then the scripted decision
 * (default: approved as proposed, by `test` via `api`).
 */
export function scriptedApproval(op: ApprovalOpcode, scripts: ApprovalScripts | undefined): MemoEntry {
  const req = requestOf(op);
  const fail = (why: string): never => {
    throw new Error(`testWorkflow: approval "${op.name}" ${why}`);
  };
  if (!gatedByRisk(op)) return { data: notGated(req.args) };
  const entry = typeof scripts === 'function' ? scripts : scripts?.[op.name];
  const script: ApprovalScript = (typeof entry === 'function' ? entry(req) : entry) ?? { status: 'approved' };
  if ('gated' in script) {
    if (script.gated !== false) fail('scripts gated: only { gated: false } is a gate outcome');
    if (req.if === undefined)
      fail(`has no if to wave it through, and its risk ${JSON.stringify(req.risk)} meets minRisk; script a decision`);
    return { data: notGated(req.args) };
  }
  const approvalId = `apr_test_${op.name}`;
  if ('timedOut' in script) {
    if (req.timeoutMs === undefined) fail('has no timeout to pass');
    switch (req.onTimeout) {
      case 'approve':
      case 'reject':
        return decided({
          gated: true,
          approvalId,
          status: req.onTimeout === 'approve' ? 'approved' : 'denied',
          args: req.args,
          decidedBy: 'system:timeout',
          decidedVia: 'timeout',
        });
      case 'fail':
        return { error: { message: `Approval ${approvalId} (${req.tool}) timed out: onTimeout is fail.` } };
      default:
        return fail('escalates at its timeout and still waits for a decision; script one');
    }
  }
  const offered = (kind: ApprovalTestRequest['allow'][number]) => req.allow.includes(kind);
  if (script.status !== 'approved' && script.status !== 'denied')
    fail(`status must be approved or denied, got ${JSON.stringify(script.status)}`);
  if (script.status === 'approved' && !offered('approve')) fail('cannot be approved: allow lacks approve');
  if (script.status === 'denied' && !offered('reject')) fail('cannot be denied: allow lacks reject');
  const edited = 'args' in script && script.args !== undefined;
  if (edited && script.status === 'denied') fail('takes args only with an approve');
  if (edited && !offered('edit')) fail('cannot take edited args: allow lacks edit');
  if (script.response !== undefined && !offered('respond')) fail('cannot take a response: allow lacks respond');
  const decision: ApprovalDecision = {
    gated: true,
    approvalId,
    status: script.status,
    args: edited ? script.args : req.args,
    decidedBy: script.decidedBy ?? 'test',
    decidedVia: script.decidedVia ?? 'api',
  };
  if (script.response !== undefined) decision.response = script.response;
  return decided(decision);
}

const decided = (d: ApprovalDecision): MemoEntry => ({ data: normalise(d, 'approval decision').value });
