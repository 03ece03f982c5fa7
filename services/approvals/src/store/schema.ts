import { sql } from 'drizzle-orm';
import { index, integer, jsonb, pgSchema, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import { outboxTable, retentionTable } from '@dws/runtime';

export const approvals = pgSchema('approvals');

/**
 * Approvals parked runs wait on (SPEC Approval). One per (run, step): a
 * redelivered hand-off finds it. `expires_at` stays set as the record's
 * field; `timer_at` is the pending timeout still to fire (cleared once it
 * fired or the approval closed), so the timer reads only live rows.
 */
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
    /** Decisions offered (approve, edit, reject, respond). */
    allow: text('allow').array().notNull(),
    /** The decider's free-text answer (allow has respond). */
    response: text('response'),
    /** The pending timeout; null once fired, decided or cancelled. */
    timerAt: timestamp('timer_at', { withTimezone: true }),
  },
  (t) => [
    index('approvals_ws_requested').on(t.workspaceId, t.requestedAt.desc(), t.id.desc()),
    uniqueIndex('approvals_run_step').on(t.workspaceId, t.runId, t.stepId),
    index('approvals_timer').on(t.timerAt).where(sql`timer_at is not null`),
    index('approvals_open_by_run').on(t.runId).where(sql`status in ('pending', 'escalated')`),
  ],
);

export const outbox = outboxTable(approvals);

/** Each workspace's retention window (projection of `gateway.fact.workspace`): what store/retention.ts deletes past. */
export const retention = retentionTable(approvals);
