import type { StreamSpec } from '@dws/bus';

/**
 * Where services meet on the bus. A fact starts with its publisher
 * (`invoker.fact.workflows`), a command with its handler
 * (`scheduler.cmd.start`). Every service ensures the streams it touches at
 * start; ensureStream is idempotent.
 */
export const streams = {
  schedulerCmds: { name: 'SCHEDULER_CMDS', subjects: ['scheduler.cmd.>'] },
  invokerFacts: { name: 'INVOKER_FACTS', subjects: ['invoker.fact.>'] },
  gatewayFacts: { name: 'GATEWAY_FACTS', subjects: ['gateway.fact.>'] },
  ingestCmds: { name: 'INGEST_CMDS', subjects: ['ingest.cmd.>'] },
  dispatcherCmds: { name: 'DISPATCHER_CMDS', subjects: ['webhook-dispatcher.cmd.>'] },
  approvalsCmds: { name: 'APPROVALS_CMDS', subjects: ['approvals.cmd.>'] },
  invokerCmds: { name: 'INVOKER_CMDS', subjects: ['invoker.cmd.>'] },
  schedulerFacts: { name: 'SCHEDULER_FACTS', subjects: ['scheduler.fact.>'] },
} satisfies Record<string, StreamSpec>;

/**
 * Ack wait of the consumers of commands whose handler is one short
 * transaction (StartRun, emits, webhook sends, deferred wakes): a message a
 * replica pulled just before it died is redelivered after this, not after
 * the bus default of 30 s. A slower handler is only redelivered early, which
 * its idempotent consumer absorbs.
 */
export const COMMAND_ACK_WAIT_MS = 10_000;

/** Events per `waiters.wakeMany` call: ingest sends at most this many, the scheduler refuses more. */
export const WAKE_BATCH_MAX = 500;

export const subjects = {
  /** StartRun: ingest (and later replay/cron/children) -> scheduler. */
  startRun: 'scheduler.cmd.start',
  /**
   * StartRun as a core request a scheduler replica answers once the run is stored:
   * ingest's outbox tries it first (one hop, no stream write); on any failure the
   * same bytes go to `startRun` (the scheduler's insert is idempotent on the run id).
   */
  startRunNow: 'scheduler.start.now',
  /** WorkflowsRegistered: invoker -> ingest (trigger index), scheduler (retry, flow control). */
  workflowsRegistered: 'invoker.fact.workflows',
  /**
   * WorkflowsRegistered as a core request, answered once the projection committed it: the
   * invoker answers a registration only after both projections hold it (read-your-writes).
   */
  applyWorkflowsIngest: 'ingest.workflows.apply',
  applyWorkflowsScheduler: 'scheduler.workflows.apply',
  /** WorkspaceUpserted: gateway -> invoker (signing keys) and others. */
  workspaceUpserted: 'gateway.fact.workspace',
  /** ApiRequest for `waiters.wake`: ingest -> scheduler when the request could not be made at once (durable). */
  /**
   * Scheduler API calls as durable commands (ApiRequest; its op picks the call), one consumer for all:
   * ingest's deferred `waiters.wake` and each `runs.cancelOn` (an event matched workflows' cancelOn,
   * written with the event).
   */
  schedulerApiCommand: 'scheduler.cmd.wake',
  /** EmitEvent: scheduler -> ingest (step.emit). */
  emitEvent: 'ingest.cmd.emit',
  /** SendWebhook: scheduler -> webhook-dispatcher (ctx.webhook.send). */
  sendWebhook: 'webhook-dispatcher.cmd.send',
  /** ResolveStep: approvals (and later the invoker's Infer) -> scheduler: completes a parked step and wakes its run. */
  resolveStep: 'scheduler.cmd.resolve',
  /** ApprovalListed: approvals -> scheduler: a gated approval is listed; its run reads needsAttention until the step resolves. */
  approvalListed: 'scheduler.cmd.attention',
  /** StepHandoff: scheduler -> approvals (Approval opcode). */
  requestApproval: 'approvals.cmd.request',
  /** RunFinished: scheduler -> approvals, only for a run that ended with a step open: its open approvals are cancelled. */
  closeApprovals: 'approvals.cmd.close',
  /** StepHandoff: scheduler -> invoker (Infer opcode: the service makes the model call). */
  requestInference: 'invoker.cmd.infer',
  /** RunFinished: scheduler -> webhook-dispatcher (run.* lifecycle deliveries), gateway (usage metering). Approvals gets closeApprovals. */
  runFinished: 'scheduler.fact.run.finished',
  /** StepFailed: scheduler -> webhook-dispatcher (step.failed). */
  stepFailed: 'scheduler.fact.step.failed',
  /** ModelCeilingReached: scheduler -> gateway (a model call refused at a workspace's monthly ceiling: suspend it). */
  modelCeilingReached: 'scheduler.fact.model.ceiling',
  /** InvokeRequest/InvokeResult: scheduler -> invoker, core request/reply. */
  invoke: 'invoker.invoke',
  /** Core request: where a run's passes may go directly (RouteRequest -> RouteReply). */
  route: 'invoker.route',
  /** A scheduler replica handed its runs back (it is stopping): every replica claims what is due now (ephemeral). */
  runsDue: 'scheduler.runs.due',
  /** Live timeline frames of one run (ephemeral). */
  runTimeline: (workspaceId: string, runId: string) => `live.run.${workspaceId}.${runId}`,
  /** Live run_status frames of a workspace (ephemeral). */
  workspaceRuns: (workspaceId: string) => `live.runs.${workspaceId}`,
  /** A gateway changed keys or a suspension (ephemeral): every replica drops its cached key records. */
  gatewayKeysChanged: 'live.gateway.keys',
  /** Live tail of recorded events of a workspace (ephemeral): ingest -> gateway GET /v1/events/stream. */
  workspaceEvents: (workspaceId: string) => `live.events.${workspaceId}`,
} as const;
