import { ApprovalListedSchema, create, ResolveStepSchema, toBinary } from '@dws/proto';
import type { OutboxMessage } from './outbox.js';
import { subjects } from './topology.js';

const enc = new TextEncoder();

/**
 * ResolveStep for the scheduler, from a service that completed a handed-off
 * step (approvals' decision, the invoker's model call): the step's result
 * (memo data, with the SPEC Usage of a model call) or its error. Keyed by run
 * and step: a step is resolved once, so a republished copy is dropped by the
 * stream, and the scheduler ignores any later one.
 */
export function resolveStepMessage(
  t: { workspaceId: string; runId: string; stepId: string },
  result: { data: unknown; usage?: unknown } | { error: string },
): OutboxMessage {
  return {
    subject: subjects.resolveStep,
    msgId: `resolve:${t.runId}:${t.stepId}`,
    payload: toBinary(
      ResolveStepSchema,
      create(ResolveStepSchema, {
        workspaceId: t.workspaceId,
        runId: t.runId,
        stepId: t.stepId,
        ...('error' in result
          ? { errorMessage: result.error }
          : { data: enc.encode(JSON.stringify(result.data ?? null)), ...(result.usage !== undefined ? { usage: enc.encode(JSON.stringify(result.usage)) } : {}) }),
      }),
    ),
  };
}

/**
 * ApprovalListed for the scheduler, from the approvals service once a gated
 * Approval step is recorded as an open approval (in the same transaction,
 * through the outbox): only then does its run read needsAttention, so a
 * client that sees it finds the approval listed. Keyed by run and step.
 */
export function approvalListedMessage(t: { workspaceId: string; runId: string; stepId: string }, approvalId: string): OutboxMessage {
  return {
    subject: subjects.approvalListed,
    msgId: `listed:${t.runId}:${t.stepId}`,
    payload: toBinary(ApprovalListedSchema, create(ApprovalListedSchema, { ...t, approvalId })),
  };
}
