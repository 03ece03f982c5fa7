/** A stored approval as the store reads it (jsonb columns parsed, timestamps as Dates or strings). */
export interface ApprovalRow {
  id: string;
  workspace_id: string;
  run_id: string;
  step_id: string;
  step: string;
  workflow: string;
  app: string;
  tool: string;
  args: unknown;
  risk: string | null;
  policy: string | null;
  summary: string | null;
  context: unknown;
  escalates_to: string | null;
  on_timeout: string;
  allow: string[];
  status: string;
  iteration: number;
  requested_at: Date | string;
  expires_at: Date | string | null;
  decided_at: Date | string | null;
  decided_by: string | null;
  decided_via: string | null;
  edited_args: unknown;
  has_edit: boolean;
  response: string | null;
}

const iso = (v: Date | string | null): string | undefined => (v === null ? undefined : new Date(v).toISOString());

/**
 * The approval record of the API (SPEC Approval, camelCase): absent fields
 * are omitted, never null. `editedArgs` is present only when the decider
 * edited (a JSON null edit included).
 */
export function approvalRecord(r: ApprovalRow): Record<string, unknown> {
  const out: Record<string, unknown> = {
    id: r.id,
    runId: r.run_id,
    workflow: r.workflow,
    app: r.app,
    step: r.step,
    tool: r.tool,
    args: r.args,
  };
  if (r.risk !== null) out.risk = r.risk;
  if (r.policy !== null) out.policy = r.policy;
  if (r.summary !== null) out.summary = r.summary;
  if (r.context !== null && r.context !== undefined) out.context = r.context;
  if (r.escalates_to !== null) out.escalatesTo = r.escalates_to;
  out.onTimeout = r.on_timeout;
  out.status = r.status;
  out.allow = r.allow;
  out.requestedAt = iso(r.requested_at);
  if (r.expires_at !== null) out.expiresAt = iso(r.expires_at);
  if (r.decided_at !== null) out.decidedAt = iso(r.decided_at);
  if (r.decided_by !== null) out.decidedBy = r.decided_by;
  if (r.decided_via !== null) out.decidedVia = r.decided_via;
  if (r.has_edit) out.editedArgs = r.edited_args;
  if (r.response !== null) out.response = r.response;
  return out;
}
