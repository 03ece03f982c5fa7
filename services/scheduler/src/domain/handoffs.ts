import { create, EmitEventSchema, ModelCeilingReachedSchema, RunFinishedSchema, SendWebhookSchema, StepFailedSchema, StepHandoffSchema, toBinary } from '@dws/proto';
import type { StepError } from '@dws/protocol';
import { subjects, type OutboxMessage } from '@dws/runtime';
import type { StepOutcome } from './reply.js';

const enc = new TextEncoder();

/**
 * The command a step hands to another service. Its msgId is the run and
 * hashed step id, and the payload carries ids drawn once and memoised with
 * the step: Emit and Webhook are exactly-once however often it is published.
 */
export function handoffMessage(run: { id: string; workspaceId: string; app: string; workflow: string }, s: StepOutcome): OutboxMessage {
  const h = s.handoff!;
  const msgId = `${run.id}:${s.id}`;
  switch (h.kind) {
    case 'emit':
      return {
        subject: subjects.emitEvent,
        msgId,
        payload: toBinary(
          EmitEventSchema,
          create(EmitEventSchema, {
            workspaceId: run.workspaceId,
            eventId: h.eventId,
            name: h.name,
            data: enc.encode(h.dataJson),
            app: run.app,
            dedupeId: h.dedupeId ?? '',
            targetApp: h.targetApp ?? '',
            sourceRunId: run.id,
            dueAtMs: BigInt(h.dueAtMs ?? 0),
            tags: h.tags ?? [],
            session: h.session ?? '',
          }),
        ),
      };
    case 'webhook':
      return {
        subject: subjects.sendWebhook,
        msgId,
        payload: toBinary(
          SendWebhookSchema,
          create(SendWebhookSchema, {
            workspaceId: run.workspaceId,
            deliveryId: h.deliveryId,
            app: run.app,
            url: h.url,
            body: enc.encode(h.bodyJson),
            sourceRunId: run.id,
            stepId: s.id,
          }),
        ),
      };
    case 'approval':
    case 'infer':
      return {
        subject: h.kind === 'approval' ? subjects.requestApproval : subjects.requestInference,
        msgId,
        payload: toBinary(
          StepHandoffSchema,
          create(StepHandoffSchema, {
            workspaceId: run.workspaceId,
            runId: run.id,
            stepId: s.id,
            stepName: s.name,
            workflow: run.workflow,
            app: run.app,
            opcode: enc.encode(h.requestJson),
          }),
        ),
      };
    case 'model_ceiling':
      return {
        subject: subjects.modelCeilingReached,
        msgId,
        payload: toBinary(
          ModelCeilingReachedSchema,
          create(ModelCeilingReachedSchema, {
            workspaceId: run.workspaceId,
            month: h.month,
            tokens: h.spent.tokens,
            cost: h.spent.cost,
            atMs: BigInt(Date.now()),
          }),
        ),
      };
  }
}

type RunRef = { id: string; workspaceId: string; app: string; workflow: string; tags?: string[] | null };

/**
 * What a run's end publishes: the run.succeeded / run.failed / run.cancelled
 * lifecycle fact, keyed by the run (published once), and, only when the run
 * ended with a step still open (waiting or on a child: an Approval may wait
 * on it), the same fact to approvals, which cancels that run's open
 * approvals. Most runs never wait, and approvals then never hears of them.
 */
export function runEndMessages(run: RunRef, status: string, resultJson: string | null, error: StepError | null, nothingOpen = false): OutboxMessage[] {
  const payload = toBinary(
    RunFinishedSchema,
    create(RunFinishedSchema, {
      workspaceId: run.workspaceId,
      runId: run.id,
      workflow: run.workflow,
      app: run.app,
      status,
      result: resultJson ? enc.encode(resultJson) : new Uint8Array(),
      error: error ? enc.encode(JSON.stringify(error)) : new Uint8Array(),
      atMs: BigInt(Date.now()),
      nothingOpen,
      tags: run.tags ?? [],
    }),
  );
  const fact = { subject: subjects.runFinished, msgId: `finished:${run.id}`, payload };
  return nothingOpen ? [fact] : [fact, { subject: subjects.closeApprovals, msgId: `close-approvals:${run.id}`, payload }];
}

/** The step.failed lifecycle fact of a terminal step failure, keyed by the run and step. */
export function stepFailedMessage(run: RunRef, s: StepOutcome): OutboxMessage {
  return {
    subject: subjects.stepFailed,
    msgId: `step-failed:${run.id}:${s.id}`,
    payload: toBinary(
      StepFailedSchema,
      create(StepFailedSchema, {
        workspaceId: run.workspaceId,
        runId: run.id,
        workflow: run.workflow,
        app: run.app,
        stepId: s.id,
        stepName: s.name,
        error: enc.encode(JSON.stringify(s.error ?? { message: 'Step failed.' })),
        attempts: s.attempts,
        atMs: BigInt(Date.now()),
        tags: run.tags ?? [],
      }),
    ),
  };
}
