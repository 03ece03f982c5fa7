import type { Bus, Subscription } from '@dws/bus';
import type { Database } from '@dws/db';
import type { Logger } from '@dws/log';
import { fromBinary, StepHandoffSchema } from '@dws/proto';
import { nowMs } from '@dws/telemetry';
import { approvalListedMessage, COMMAND_ACK_WAIT_MS, ids, resolveStepMessage, streams, subjects, type Outbox, type OutboxMessage } from '@dws/runtime';
import { notGatedResult } from '../domain/decision.js';
import { evaluateGate, parseApprovalRequest } from '../domain/request.js';
import { insertApproval } from '../store/approvals.js';
import { approvalAttributes, traceApproval } from './approval-trace.js';

const dec = new TextDecoder();

/**
 * Approval hand-offs from the scheduler. A refused opcode or an `if` that
 * cannot be evaluated fails the step at once; an ungated one completes it
 * at once; a gated one becomes a pending approval (one per run and step, so
 * a redelivered hand-off changes nothing), the run stays parked, and the
 * scheduler is told it is listed (the run's needsAttention).
 */
export function consumeHandoffs(d: { bus: Bus; db: Database; log: Logger; outbox: Outbox; onArmed: () => void }): Promise<Subscription> {
  return d.bus.consume(
    { stream: streams.approvalsCmds.name, durable: 'approvals-requests', filterSubject: subjects.requestApproval, concurrency: 16, ackWaitMs: COMMAND_ACK_WAIT_MS },
    async (msg) => {
      const startMs = nowMs();
      const h = fromBinary(StepHandoffSchema, msg.data);
      const target = { workspaceId: h.workspaceId, runId: h.runId, stepId: h.stepId };
      let raw: unknown;
      try {
        raw = JSON.parse(dec.decode(h.opcode));
      } catch {
        raw = undefined;
      }
      const parsed = parseApprovalRequest(raw);
      const gate = parsed.ok ? evaluateGate(parsed.request) : parsed;
      // What the span of this request says, when there is one to make (not for a redelivery of a listed approval).
      let traced: Record<string, string> | undefined = { 'dws.step.name': h.stepName, 'dws.approval.status': gate.ok ? 'not_gated' : 'refused' };
      const pending = await d.db.tx(async (tx) => {
        const out: OutboxMessage[] = [];
        if (!gate.ok) out.push(resolveStepMessage(target, { error: gate.error }));
        else if (!gate.gated) out.push(resolveStepMessage(target, { data: notGatedResult(parsed.ok ? parsed.request.args : null) }));
        else if (parsed.ok) {
          const { row, created } = await insertApproval(tx, { id: ids.generic('apr'), ...target, step: h.stepName, workflow: h.workflow, app: h.app, request: parsed.request });
          // A redelivered hand-off of an approval decided meanwhile tells the scheduler nothing.
          if (row.status === 'pending' || row.status === 'escalated') out.push(approvalListedMessage(target, row.id));
          traced = created ? approvalAttributes(row, row.status) : undefined;
        }
        return d.outbox.enqueue(tx, out);
      });
      await d.outbox.afterCommit(pending);
      if (traced) traceApproval('approval.request', h.runId, startMs, traced);
      if (parsed.ok && parsed.request.timeoutMs !== undefined) d.onArmed();
      if (!gate.ok) d.log.info({ runId: h.runId, stepId: h.stepId, error: gate.error }, 'approval refused; the step fails');
    },
  );
}
