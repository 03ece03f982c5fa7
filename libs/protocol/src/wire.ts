/**
 * The runner wire protocol of SPEC.md ("Wire-protocol records", "Runner
 * protocol") as TypeScript types. Pure declarations plus a few constant
 * lists; validation of untrusted input lives in `parse.ts`.
 *
 * Fields typed `unknown` carry arbitrary JSON.
 */
import type { AiSpendCeilings } from './ai-spend.js';

/** SPEC StepError: a failed step or a terminal run error. */
export interface StepError {
  message: string;
  stack?: string;
}

/**
 * SPEC Usage: metering axes of a model call. Every field is optional and a
 * missing field means "not reported", never zero.
 */
export interface Usage {
  model?: string;
  tokensIn?: number;
  tokensOut?: number;
  /** Present only when the runner priced the call. */
  cost?: number;
  latencyMs?: number;
  /** Present only when the inference cache was engaged. */
  cacheHit?: boolean;
}

/** A completed step's result. */
export interface MemoData {
  data: unknown;
}
/** A completed step that threw. */
export interface MemoError {
  error: StepError;
}
/** A step started but unfinished (parked sleep, wait or child): never re-run or re-emitted. */
export interface MemoPending {
  pending: true;
}
/** SPEC Memo entry: value of the invoke `steps` map, keyed by hashed step id. Exactly one field. */
export type MemoEntry = MemoData | MemoError | MemoPending;

/** Memo map: hashed step id -> memo entry. */
export type Memo = Record<string, MemoEntry>;

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The scope of a log line emitted outside any step. */
export const ROOT_SCOPE = '@root';

/** SPEC Runner log line (in invoke replies). */
export interface RunnerLogLine {
  level: LogLevel;
  message: string;
  /** Sensitive keys are redacted before the line leaves the runner. */
  fields?: Record<string, unknown>;
  /** Enclosing step name, or `@root`. */
  scope: string;
  /** Per-scope counter; with runId, attempt and scope it is the replay-stable dedupe key. */
  index: number;
  /** Runner wall clock, epoch ms (advisory). */
  tsMs: number;
}

/** Every op of SPEC's Opcode table, in table order, then this service's extensions (Tag). */
export const OPCODES = [
  'StepRun',
  'Sleep',
  'SleepUntil',
  'WaitForEvent',
  'RunWorkflow',
  'Emit',
  'Webhook',
  'Approval',
  'Infer',
  'Score',
  'Tag',
] as const;
export type OpcodeName = (typeof OPCODES)[number];

/** True for an op this protocol version knows. An unknown op fails the step (SPEC Versioning 5). */
export function isKnownOpcode(op: unknown): op is OpcodeName {
  return typeof op === 'string' && (OPCODES as readonly string[]).includes(op);
}

interface OpcodeBase {
  /** Hashed step id; the result is stored under it. */
  id: string;
  /** Human-readable step id (after positional disambiguation, e.g. `x:1`). */
  name: string;
}

export interface StepRunOpcode extends OpcodeBase {
  op: 'StepRun';
  /** Step result; absent when `error` is set. */
  data?: unknown;
  /** Declared step input. */
  input?: unknown;
  /** Step failure. */
  error?: StepError;
  /** false fails the run now, skipping remaining attempts. */
  retriable?: boolean;
  /** Overrides the policy backoff for this retry. */
  retryAfterMs?: number;
  /** Journal block stored opaquely. */
  ai?: unknown;
  usage?: Usage;
  /**
   * Extension: when the step's code began, UTC epoch ms (the step record's
   * `startedAt`). The service keeps it between the start of the pass and the
   * moment the step reached it; without it, the step counts from the pass's
   * start or from the checkpoint before it.
   */
  startedAtMs?: number;
}

export interface SleepOpcode extends OpcodeBase {
  op: 'Sleep';
  sleepMs: number;
}

export interface SleepUntilOpcode extends OpcodeBase {
  op: 'SleepUntil';
  /** Absolute wake time, UTC epoch ms. */
  sleepUntilMs: number;
}

export interface WaitForEventOpcode extends OpcodeBase {
  op: 'WaitForEvent';
  eventName: string;
  timeoutMs: number;
  /** CEL predicate on the event payload. */
  eventIf?: string;
}

export interface RunWorkflowOpcode extends OpcodeBase {
  op: 'RunWorkflow';
  childName: string;
  childData: unknown;
  childApp?: string;
  childRunner?: string;
}

export interface EmitOpcode extends OpcodeBase {
  op: 'Emit';
  eventName: string;
  /** Event payload. */
  data: unknown;
  dedupeId?: string;
  /** Narrows the emit to one app's triggers; omitted broadcasts project-wide. */
  targetApp?: string;
  /**
   * An extension of SPEC: take the event in later (ms, duration text like
   * "2h", or an RFC 3339 timestamp; at most a year ahead), resolved once when
   * the service stores the step. A runner that omits it emits at once.
   */
  delay?: number | string;
  /**
   * An extension of SPEC: the event's tags (as POST /events takes them), so
   * the runs it starts carry them. At most 10 strings of 1-128 characters.
   */
  tags?: string[];
  /** An extension of SPEC: the event's session (as POST /events takes it), which the runs it starts join. */
  session?: string;
}

export interface WebhookOpcode extends OpcodeBase {
  op: 'Webhook';
  webhookUrl: string;
  /** Webhook body. */
  data: unknown;
}

export type ApprovalDecisionKind = 'approve' | 'edit' | 'reject' | 'respond';
export type ApprovalOnTimeout = 'escalate' | 'approve' | 'reject' | 'fail';

export interface ApprovalOpcode extends OpcodeBase {
  op: 'Approval';
  /** Proposed action. */
  tool: string;
  /** Proposed tool arguments. */
  data: unknown;
  /** Deadline at which onTimeout fires, in ms; absent: no deadline (no expiresAt), the approval waits for a decision. */
  timeoutMs?: number;
  risk?: string;
  policy?: string;
  summary?: string;
  context?: string;
  escalatesTo?: string;
  /** Decisions offered; omitted means all four. */
  allow?: ApprovalDecisionKind[];
  /** Default escalate. */
  onTimeout?: ApprovalOnTimeout;
  /** CEL condition over tool, args, risk and iteration. */
  if?: string;
  minRisk?: string;
  /** Agent-loop turn; omitted means 0. */
  iteration?: number;
}

export interface InferOpcode extends OpcodeBase {
  op: 'Infer';
  /** Model request. */
  data: unknown;
  ai?: unknown;
  usage?: Usage;
}

export interface ScoreOpcode extends OpcodeBase {
  op: 'Score';
  /** `{ name, value, ... }`. */
  data: { name: string; value: unknown; [key: string]: unknown };
}

/**
 * An extension of SPEC: tags added to the run (step.tag), exactly once per
 * step id; the step's result is the run's tags after it. A run keeps at most
 * 10 tags: past the tenth, the rest are not added (as a batch's merge).
 */
export interface TagOpcode extends OpcodeBase {
  op: 'Tag';
  tags: string[];
}

/** SPEC Opcode: element of a 206 reply, discriminated on `op`. */
export type Opcode =
  | StepRunOpcode
  | SleepOpcode
  | SleepUntilOpcode
  | WaitForEventOpcode
  | RunWorkflowOpcode
  | EmitOpcode
  | WebhookOpcode
  | ApprovalOpcode
  | InferOpcode
  | ScoreOpcode
  | TagOpcode;

/** The triggering event of a run (`name` is informational). */
export interface InvokeEvent {
  name: string;
  data: unknown;
}

/** `ctx` of the invoke request body. */
export interface InvokeContext {
  runId: string;
  /** Dispatch key: the registered workflow name. */
  workflow: string;
  /** Run-level attempt counter. */
  attempt: number;
  app: string;
  /** The run's pin; empty string for anycast. */
  runner: string;
  /** Set on an onFailure invocation. */
  onFailure?: boolean;
  /** Terminal error; present only with onFailure. */
  error?: StepError;
  /** W3C trace context of the service's invoke span. */
  traceparent?: string;
  /**
   * Extension: the service accepts checkpoints of this pass under this
   * token (POST /v1/runs/{id}/checkpoint, or a Connect `checkpoint` frame):
   * steps stored as they finish, so one pass can run many steps durably.
   */
  checkpoint?: string;
  /**
   * Extension, with `checkpoint`: the scheduler replica driving this pass
   * takes its checkpoints here itself (POST, the same body), with no gateway
   * or bus in between. Offered only when the operator says where runners
   * reach the replica; a runner that cannot falls back to the gateway.
   */
  checkpointUrl?: string;
  /**
   * Extension, with `checkpointUrl`: the same replica's WebSocket (ws:// or
   * wss://) taking the same checkpoints as frames, one socket per runner
   * process and replica, so a step costs no HTTP exchange. A runner that
   * cannot open it POSTs to `checkpointUrl`.
   */
  checkpointSocket?: string;
}

/** SPEC POST /invoke request body (service to runner). */
export interface InvokeRequestBody {
  event: InvokeEvent;
  steps: Memo;
  ctx: InvokeContext;
}

/** 200: the handler returned and the run succeeds. */
export interface InvokeReply200 {
  data: unknown;
  logs: RunnerLogLine[];
  /**
   * Extension of this service (absent in SPEC's shape, optional both ways):
   * steps finished in the pass whose handler then returned, as successful
   * StepRun opcodes. The service stores them with the result, so a workflow's
   * last step and its return take one pass instead of two.
   */
  opcodes?: Opcode[];
}

/** 206: steps discovered this pass. */
export interface InvokeReply206 {
  opcodes: Opcode[];
  logs: RunnerLogLine[];
}

/**
 * 4xx (non-retriable, fails the run) and 5xx (retriable transport error).
 * `error` may carry extra fields such as `code`.
 */
export interface InvokeReplyError {
  error?: StepError & { code?: string };
  logs: RunnerLogLine[];
}

export type InvokeReply = InvokeReply200 | InvokeReply206 | InvokeReplyError;

/** Event trigger; `event` may end in `*`, `if` is a CEL filter. */
export interface EventTrigger {
  event: string;
  if?: string;
}
export interface CronTrigger {
  cron: string;
}
export type WorkflowTrigger = EventTrigger | CronTrigger;

/** SPEC shows maxAttempts; the backoff between attempts takes Trigger.dev's names (retry.ts). Any other field is a 400. */
export interface RetryPolicy {
  /** Total attempts per step. @default 1 (no retries) */
  maxAttempts: number;
  /** Each wait is the previous one times this (1-10). @default 2 */
  factor?: number;
  /** The first wait, ms. @default 1000 */
  minTimeoutInMs?: number;
  /** The longest wait, ms (up to 24 h). @default 30000 */
  maxTimeoutInMs?: number;
  /** Draw each wait from [half, all] of it. @default true */
  randomize?: boolean;
}

/** At most `limit` runs of the workflow (per evaluated CEL `key`) holding a slot at once. */
export interface ConcurrencyConfig {
  limit: number;
  key?: string;
  /**
   * `fn` (default): the workflow's own slots. `env`: the key's slots are
   * shared by every workflow of the workspace with an env constraint on the
   * same key (a key is then required; at most one per workflow). Inngest's
   * `account` is refused at registration.
   */
  scope?: 'fn' | 'env';
}

/** Advisory steps manifest entry: rendering metadata only. */
export interface StepManifestEntry {
  name: string;
  description?: string;
  hidden?: boolean;
}

/** A workflow's cancelOn entry (Inngest's shape). */
export interface CancelOn {
  event: string;
  if?: string;
  timeout?: number | string;
}

/** One workflow in a register body. */
export interface WorkflowRegistration {
  name: string;
  /** Omitted means an implicit event trigger on the workflow name. */
  triggers?: WorkflowTrigger[];
  retry?: RetryPolicy;
  /** true if an onFailure handler exists. */
  onFailure?: boolean;
  /** A limit, one constraint, or two (a run then needs a slot of each, e.g. the workflow's and one per user). */
  concurrency?: number | ConcurrencyConfig | ConcurrencyConfig[];
  /** AI spend ceilings (opt-in): an Infer step started past one fails instead of calling. */
  aiSpend?: AiSpendCeilings;
  steps?: StepManifestEntry[];
  // Flow-control fields whose shapes SPEC does not show: carried opaquely.
  throttle?: unknown;
  rateLimit?: unknown;
  debounce?: unknown;
  priority?: unknown;
  batchEvents?: unknown;
  /**
   * Events that cancel this workflow's active runs: an event named `event`
   * (or `prefix*`) cancels each run for which `if` holds, a CEL expression
   * over `event` (the run's own triggering event) and `async` (the
   * cancelling one); without `if`, every active run. `timeout`: only runs
   * created within it (ms, or "30m", "2d"). At most 10.
   */
  cancelOn?: CancelOn | CancelOn[];
  /**
   * The run is cancelled when still queued `start` after it was created
   * (flow control, no room), or not ended `finish` after it (ms, or "30s",
   * "2h", up to a year). Every run of the workflow: children, replays and
   * onFailure runs too.
   */
  timeouts?: { start?: number | string; finish?: number | string };
  idempotency?: unknown;
  singleton?: unknown;
}

/** SPEC POST /register body. */
export interface RegisterBody {
  app: string;
  /** Stable runner id; omitted means the endpoint is keyed by url. */
  runner?: string;
  /** The runner's invoke endpoint. */
  url: string;
  runtime?: string;
  language?: string;
  version?: string;
  /** Omitted means assumed compatible. */
  protocolVersion?: number;
  /** One-way fingerprint of the signing key (see `keyFingerprint`). */
  keyFingerprint?: string;
  workflows: WorkflowRegistration[];
}
