import type { Database } from '@dws/db';
import { invalid, notFound } from '@dws/protocol';
import { resolveStepMessage, type ApiHandler, type Outbox } from '@dws/runtime';
import { nowMs } from '@dws/telemetry';
import { checkDecision, decidedResult, STATUSES, type DecidedVia } from '../domain/decision.js';
import { approvalRecord } from '../domain/record.js';
import type { AllowEntry, OnTimeout } from '../domain/request.js';
import { approvalById, listApprovals, recordDecision } from '../store/approvals.js';
import { approvalAttributes, traceApproval } from './approval-trace.js';

/** SPEC Limits: approval pages 1-1000, default 100; out of range is clamped. */
const LIMIT = { def: 100, min: 1, max: 1000 };

const one = (v: unknown): unknown => (Array.isArray(v) ? v[0] : v);

function limitOf(query: Record<string, unknown>): number {
  const raw = one(query.limit);
  if (raw === undefined || raw === '') return LIMIT.def;
  const s = String(raw).trim();
  if (!/^[+-]?\d+$/.test(s)) throw invalid('invalid_limit', 'limit must be an integer.');
  return Math.min(LIMIT.max, Math.max(LIMIT.min, Number(s)));
}

/**
 * The approvals API behind the gateway (svc.approvals.api): list, read, and
 * decide. Permission (a public key may not decide) is the gateway's; the
 * decider and channel come from the authenticated caller, never the body.
 */
export function approvalsApi(d: { db: Database; outbox: Outbox }): Record<string, ApiHandler> {
  return {
    async 'approvals.list'({ caller, query }) {
      const status = one(query.status);
      if (status !== undefined && status !== '' && !STATUSES.includes(status as (typeof STATUSES)[number])) {
        throw invalid('invalid_status', `status must be one of ${STATUSES.join(', ')}.`);
      }
      const runId = one(query.runId);
      const rows = await listApprovals(d.db, caller.workspaceId, {
        status: typeof status === 'string' && status !== '' ? status : undefined,
        runId: typeof runId === 'string' && runId !== '' ? runId : undefined,
        limit: limitOf(query),
      });
      return { body: rows.map(approvalRecord) };
    },

    async 'approvals.get'({ caller, params }) {
      const row = params.id ? await approvalById(d.db, caller.workspaceId, params.id) : undefined;
      if (!row) throw notFound('approval');
      return { body: approvalRecord(row) };
    },

    async 'approvals.decide'({ caller, params, body }) {
      const startMs = nowMs();
      const { row, pending } = await d.db.tx(async (tx) => {
        // The row lock orders this decision against the timeout and the run's end: one wins, the other sees it closed.
        const a = params.id ? await approvalById(tx, caller.workspaceId, params.id, true) : undefined;
        if (!a) throw notFound('approval');
        const verdict = checkDecision({ id: a.id, tool: a.tool, args: a.args, status: a.status, allow: a.allow as AllowEntry[], onTimeout: a.on_timeout as OnTimeout }, body);
        const via: DecidedVia = caller.via ?? 'api';
        const by = caller.actor || 'unknown';
        const decided = await recordDecision(tx, a.id, verdict, by, via);
        const target = { workspaceId: a.workspace_id, runId: a.run_id, stepId: a.step_id };
        return { row: decided, pending: await d.outbox.enqueue(tx, [resolveStepMessage(target, { data: decidedResult(a, verdict, by, via) })]) };
      });
      await d.outbox.afterCommit(pending);
      traceApproval('approval.decide', row.run_id, startMs, { ...approvalAttributes(row, row.status), 'dws.approval.via': row.decided_via ?? '' }, caller.traceparent);
      return { body: approvalRecord(row) };
    },
  };
}
