import { index, integer, jsonb, pgSchema, text, timestamp } from 'drizzle-orm/pg-core';
import { outboxTable } from '@dws/runtime';

export const approvals = pgSchema('approvals');

/** Approvals parked runs wait on (SPEC Approval); open ones have a timeout row in expires_at. */
export const approvalRequests = approvals.table(
  'approvals',
  {
    id: text('id').primaryKey(),
    workspaceId: text('workspace_id').notNull(),
    runId: text('run_id').notNull(),
    stepId: text('step_id').notNull(),
    step: text('step').notNull(),
    workflow: text('workflow').notNull(),
    app: text('app').notNull(),
    tool: text('tool').notNull(),
    args: jsonb('args'),
    risk: text('risk'),
    policy: text('policy'),
    summary: text('summary'),
    context: jsonb('context'),
    escalatesTo: text('escalates_to'),
    onTimeout: text('on_timeout').notNull().default('escalate'),
    status: text('status').notNull(),
    iteration: integer('iteration').notNull().default(0),
    requestedAt: timestamp('requested_at', { withTimezone: true }).notNull().defaultNow(),
    expiresAt: timestamp('expires_at', { withTimezone: true }),
    decidedAt: timestamp('decided_at', { withTimezone: true }),
    decidedBy: text('decided_by'),
    decidedVia: text('decided_via'),
    editedArgs: jsonb('edited_args'),
  },
  (t) => [index('approvals_ws_requested').on(t.workspaceId, t.requestedAt.desc()), index('approvals_expiry').on(t.expiresAt)],
);

export const outbox = outboxTable(approvals);
