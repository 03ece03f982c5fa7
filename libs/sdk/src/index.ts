export {
  createRunner,
  SDK_VERSION,
  type Listening,
  type ListenOptions,
  type Runner,
  type RunnerOptions,
} from './runner.js';
export type { Connection, ConnectOptions, ConnectState } from './connect.js';
export {
  ApiError,
  createClient,
  isApiError,
  type Approval,
  type ApprovalDecisionInput,
  type Client,
  type ClientOptions,
  type LogLine,
  type Run,
  type RunDetail,
  type RunListQuery,
  type RunStatus,
  type ScheduleInput,
  type ScheduleRecord,
  type SendEvent,
  type SendResult,
  type Step,
  type TimelineFrame,
  type WorkflowRecord,
} from './client.js';
export {
  NonRetriableError,
  RetryAfterError,
  StepFailedError,
  isNonRetriableError,
  isStepFailedError,
  retryAfterMsOf,
} from './errors.js';
export { AiOutputError, DEFAULT_REASKS, isAiOutputError } from './ai-output.js';
export { DEFAULT_EMBED_BATCH_SIZE } from './ai-embed.js';
export { EVAL_MAX_ITEMS } from './ai-eval.js';
export { executePass, DEFAULT_STEP_BUDGET_MS, RECOMMENDED_STEP_BUDGET_MS, type ExecuteOptions, type PassResult } from './execution.js';
export { testWorkflow, type ChildOutcome, type TestWorkflowOptions, type TestWorkflowResult } from './testing.js';
export type { ApprovalScript, ApprovalScripts, ApprovalTestRequest } from './testing-approvals.js';
export { APPROVAL_RISKS } from './approval.js';
// Redaction lives in @dws/protocol: the runner redacts before lines leave it, the scheduler again before it stores them.
export { redact, isSensitiveKey, REDACTED } from '@dws/protocol';
export { toMs, type Duration } from './duration.js';
export type { InferSchemaOutput, StandardSchemaV1 } from './standard-schema.js';
export type { WorkflowLogger } from './logger.js';
export type { InvokeHttpHandler, InvokeHttpReply, InvokeRequest } from './serve.js';
export type {
  AiEmbedRequest,
  AiEmbedResult,
  AiEvalGenerateOptions,
  AiEvalScore,
  AiEvalSummary,
  AiEvalTaskOptions,
  AiGenerateRequest,
  AiGenerateResult,
  AiRequest,
  AiResult,
  AiSteps,
  ApprovalDecidedVia,
  ApprovalDecision,
  ApprovalOptions,
  ApprovalRisk,
  EmitOptions,
  JsonSchema,
  RunWorkflowOptions,
  ScoreOptions,
  StepRunOptions,
  StepTools,
  WaitForEventOptions,
  WebhookSendOptions,
  Workflow,
  WorkflowContext,
  WorkflowCtx,
  WorkflowEvent,
  WorkflowHandler,
  WorkflowOptions,
} from './types.js';
