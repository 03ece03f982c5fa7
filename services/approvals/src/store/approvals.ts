import type { Database } from '@dws/db';
import { msUntil } from '@dws/runtime';
import type { DecidedVia, Verdict } from '../domain/decision.js';
import type { ApprovalRow } from '../domain/record.js';
import type { ApprovalRequest } from '../domain/request.js';

const COLUMNS = `id, workspace_id, run_id, step_id, step, workflow, app, tool, args, risk, policy, summary, context, escalates_to,
  on_timeout, allow, status, iteration, requested_at, expires_at, decided_at, decided_by, decided_via, edited_args,
  edited_args is not null as has_edit, response`;

/** jsonb parameters travel as JSON text: a JSON null stays a JSON null (not SQL NULL) on both drivers. */
const jsonText = (v: unknown): string | null => (v === undefined ? null : JSON.stringify(v));

export interface NewApproval {
  id: string;
  workspaceId: string;
  runId: string;
  stepId: string;
  step: string;
  workflow: string;
  app: string;
  request: ApprovalRequest;
}

/**
 * Record a gated approval, once per (run, step): a redelivered hand-off
 * inserts nothing and gets the existing row back. `expires_at` and the
 * timer are taken from the database clock, like every deadline here.
 */
export async function insertApproval(db: Database, a: NewApproval): Promise<{ row: ApprovalRow; created: boolean }> {
  const r = a.request;
  const inserted = await db.query<ApprovalRow>(
    `insert into approvals.approvals (id, workspace_id, run_id, step_id, step, workflow, app, tool, args, risk, policy, summary, context,
                                      escalates_to, on_timeout, allow, status, iteration, expires_at, timer_at)
     values ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10, $11, $12, $13::jsonb, $14, $15, $16::text[], 'pending', $17,
             now() + ($18::bigint * interval '1 millisecond'), now() + ($18::bigint * interval '1 millisecond'))
     on conflict (workspace_id, run_id, step_id) do nothing
     returning ${COLUMNS}`,
    [
      a.id, a.workspaceId, a.runId, a.stepId, a.step, a.workflow, a.app, r.tool, jsonText(r.args), r.risk ?? null, r.policy ?? null,
      r.summary ?? null, jsonText(r.context), r.escalatesTo ?? null, r.onTimeout, r.allow, r.iteration,
      r.timeoutMs === undefined ? null : Math.round(r.timeoutMs),
    ],
  );
  if (inserted[0]) return { row: inserted[0], created: true };
  const existing = await db.query<ApprovalRow>(
    `select ${COLUMNS} from approvals.approvals where workspace_id = $1 and run_id = $2 and step_id = $3`,
    [a.workspaceId, a.runId, a.stepId],
  );
  return { row: existing[0]!, created: false };
}

/** One approval of the workspace; `lock` takes its row lock for a decision (the timer skips it meanwhile). */
export async function approvalById(db: Database, workspaceId: string, id: string, lock = false): Promise<ApprovalRow | undefined> {
  const rows = await db.query<ApprovalRow>(
    `select ${COLUMNS} from approvals.approvals where workspace_id = $1 and id = $2 ${lock ? 'for update' : ''}`,
    [workspaceId, id],
  );
  return rows[0];
}

/** Newest first (requestedAt desc, id desc), filtered by status and run. */
export async function listApprovals(db: Database, workspaceId: string, f: { status?: string; runId?: string; limit: number }): Promise<ApprovalRow[]> {
  const where = ['workspace_id = $1'];
  const params: unknown[] = [workspaceId];
  if (f.status) {
    params.push(f.status);
    where.push(`status = $${params.length}`);
  }
  if (f.runId) {
    params.push(f.runId);
    where.push(`run_id = $${params.length}`);
  }
  params.push(f.limit);
  return db.query<ApprovalRow>(
    `select ${COLUMNS} from approvals.approvals where ${where.join(' and ')} order by requested_at desc, id desc limit $${params.length}`,
    params,
  );
}

/** Record a decision on a row the caller's transaction locked and found open; the timer is disarmed. */
export async function recordDecision(tx: Database, id: string, v: Verdict, by: string, via: DecidedVia): Promise<ApprovalRow> {
  const rows = await tx.query<ApprovalRow>(
    `update approvals.approvals set status = $2, decided_at = now(), decided_by = $3, decided_via = $4,
            edited_args = $5::jsonb, response = $6, timer_at = null
      where id = $1 returning ${COLUMNS}`,
    [id, v.status, by, via, v.edited ? jsonText(v.editedArgs) : null, v.response ?? null],
  );
  return rows[0]!;
}

/** Escalate (still open, no further timer) or cancel (closed, no decision) a locked row. */
export async function closeTimer(tx: Database, id: string, status: 'escalated' | 'cancelled'): Promise<void> {
  await tx.query('update approvals.approvals set status = $2, timer_at = null where id = $1', [id, status]);
}

/**
 * Pending approvals whose timeout is due, locked for the caller's
 * transaction. SKIP LOCKED: a row another replica's timer (or a decision)
 * holds is left to it, so a timeout fires once across replicas, and the
 * transaction that applies it is the one that clears `timer_at`.
 */
export async function lockDueTimers(tx: Database, limit: number): Promise<ApprovalRow[]> {
  return tx.query<ApprovalRow>(
    `select ${COLUMNS} from approvals.approvals
      where timer_at <= now() and status = 'pending'
      order by timer_at limit $1 for update skip locked`,
    [limit],
  );
}

/**
 * Milliseconds until the next timer lockDueTimers would take (0 or less: due
 * now), or undefined when none is armed: one statement outside a
 * transaction, what an idle look costs.
 */
export function nextTimerInMs(db: Database): Promise<number | undefined> {
  return msUntil(db, `select min(timer_at) from approvals.approvals where timer_at is not null and status = 'pending'`);
}

/** A run ended: its open approvals are cancelled with no decision on record. Returns how many. */
export async function cancelOpenOfRun(db: Database, workspaceId: string, runId: string): Promise<number> {
  const rows = await db.query<{ id: string }>(
    `update approvals.approvals set status = 'cancelled', timer_at = null
      where workspace_id = $1 and run_id = $2 and status in ('pending', 'escalated')
      returning id`,
    [workspaceId, runId],
  );
  return rows.length;
}
