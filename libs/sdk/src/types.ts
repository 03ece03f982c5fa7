import type {
  ApprovalDecisionKind,
  ApprovalOnTimeout,
  InvokeContext,
  Usage,
  WorkflowRegistration,
} from '@dws/protocol';
import type { Duration } from './duration.js';
import type { WorkflowLogger } from './logger.js';
import type { InferSchemaOutput, StandardSchemaV1 } from './standard-schema.js';

export interface StepRunOptions {
  /** Declared step input, recorded with the step (JSON). */
  input?: unknown;
  /** SPEC Usage of a model call the step made itself, reported with its result (step.ai.wrap sets it). */
  usage?: (result: unknown) => Usage | undefined;
}

export interface WaitForEventOptions {
  /** Event name to wait for. */
  event: string;
  /** How long to wait; on timeout the step resolves with null. */
  timeout: Duration;
  /** CEL predicate on the event payload, e.g. `event.data.orderId == "o-1"`. */
  if?: string;
}

export interface RunWorkflowOptions<TData = unknown, TResult = unknown> {
  /** The child workflow: its name, or the Workflow object (which also types data and result). */
  workflow: string | Workflow<TData, TResult>;
  /** Child input, delivered as its `event.data`. */
  data?: TData;
  /** App of the child. @default the bare name resolved same-app first, then cross-app */
  app?: string;
  /** Runner id to pin the child to. */
  runner?: string;
}

export interface EmitOptions {
  /** Event name. */
  name: string;
  data?: unknown;
  /** Drops a repeat of the same emitted event (per app) within the dedupe window. */
  dedupeId?: string;
  /** Only this app's triggers; omitted broadcasts workspace-wide. */
  targetApp?: string;
  /**
   * Take the event in later (ms, text like "30s", "2h", "3d", or a Date; at
   * most a year ahead): the step completes now with `{ id, scheduledFor }`,
   * the event wakes and starts runs then, and `client.events.cancel(id)`
   * drops it before its time. An extension of SPEC's Emit opcode.
   */
  delay?: number | string | Date;
  /**
   * Tags of the event and of the runs it starts (at most 10, each 1-128
   * characters: `tenant:acme`), as `client.send` takes them. An extension of
   * SPEC's Emit opcode.
   */
  tags?: string[];
  /**
   * The event's session (up to 256 characters), which the runs it starts
   * join, as `client.send` takes it. An extension of SPEC's Emit opcode.
   */
  session?: string;
}

export interface WebhookSendOptions {
  /** Destination of a durable outbound delivery (unsigned: a custom send has no endpoint secret). */
  url: string;
  /** Body sent (JSON). */
  body: unknown;
}

/** Risk levels the approvals service orders (low < medium < high < critical) for `minRisk`. */
export type ApprovalRisk = 'low' | 'medium' | 'high' | 'critical';

export interface ApprovalOptions<A = unknown> {
  /** The proposed action awaiting sign-off (required, non-blank). */
  tool: string;
  /** Proposed arguments (JSON); a decider may replace them (approve-with-edits). @default null */
  args?: A;
  /**
   * When `onTimeout` fires, like step.sleep's duration (`'30m'`, `5000`);
   * sent as `timeoutMs`. @default no timeout: the approval waits for a decision
   */
  timeout?: Duration;
  /** Declared risk, read by `minRisk` and by `if` as `risk`. Any string; only the four levels order against `minRisk`. */
  risk?: ApprovalRisk | (string & {});
  /** Reviewer annotations, read back on the approval record. */
  policy?: string;
  summary?: string;
  context?: string;
  /** Who is escalated to once the timeout passes under `onTimeout: 'escalate'`. */
  escalatesTo?: string;
  /** Decisions offered: `edit` allows args with an approve, `respond` a free-text response. @default all four */
  allow?: ApprovalDecisionKind[];
  /**
   * At the timeout: `escalate` (still decidable), `approve` / `reject`
   * (decided by `system:timeout`), `fail` (the step fails). @default 'escalate'
   */
  onTimeout?: ApprovalOnTimeout;
  /** CEL over `tool`, `args`, `risk` (string or null) and `iteration` (int): raise the gate only when true. */
  if?: string;
  /** Raise the gate only at or above this risk; a missing or unknown `risk` still gates (fail closed). */
  minRisk?: ApprovalRisk;
  /** Agent-loop turn of the gated call, readable from `if`. @default 0 */
  iteration?: number;
}

/** Who decided: SPEC decidedVia. `timeout` is the approval's own onTimeout (decidedBy `system:timeout`). */
export type ApprovalDecidedVia = 'console' | 'mcp' | 'api' | 'timeout' | 'unrecorded';

/**
 * What `step.approval` resolves with. Not gated (the `if` / `minRisk` rule
 * waved the call through): `{ gated: false, status: 'approved', args }`
 * with the proposed args. Gated and decided: `approvalId`, `decidedBy`,
 * `decidedVia`, and `args` are the effective args (the decider's edit on an
 * approve, else the proposed). A denial resolves too (`status: 'denied'`);
 * only `onTimeout: 'fail'` makes the step reject.
 */
export interface ApprovalDecision<A = unknown> {
  gated: boolean;
  status: 'approved' | 'denied';
  args: A;
  /** The approval record's id (`GET /v1/approvals/{id}`); set when gated. */
  approvalId?: string;
  /** The decider: a key's name, a person named by a console key, or `system:timeout`. Set when gated. */
  decidedBy?: string;
  decidedVia?: ApprovalDecidedVia;
  /** The decider's free-text answer (needs `respond` in `allow`). */
  response?: string;
}

/** A model call the service makes on the runner's behalf (Infer opcode). */
export interface AiRequest {
  provider?: string;
  model?: string;
  [key: string]: unknown;
}

/** A JSON Schema (draft-07 by default; draft 2019-09 or 2020-12 when its `$schema` says so). */
export type JsonSchema = { [key: string]: unknown };

export interface AiGenerateRequest extends AiRequest {
  prompt?: string;
  system?: string;
  messages?: { role: 'user' | 'assistant'; content: string }[];
  temperature?: number;
  maxTokens?: number;
  /**
   * The shape the answer must have: a JSON Schema, or a Standard Schema
   * (zod, valibot, ...). The model is told to answer with JSON only (the
   * schema goes into the system prompt); its text must parse as JSON and
   * validate, else the SDK re-asks (`reasks`). Checked in the runner: it is
   * never sent to the provider as a field.
   */
  output?: JsonSchema | StandardSchemaV1;
  /** Further durable calls (`<id>:reask-1`, ...) when the answer does not fit `output`. @default 1 (only with `output`) */
  reasks?: number;
  /** Inference cache TTL in ms. @default 24 h (only with temperature <= 0.2) */
  ttlMs?: number;
}

/** What `step.ai.generate` with an `output` schema resolves with. */
export interface AiGenerateResult<O = unknown> {
  /** The model's text of the call that passed. */
  text: string;
  /** The provider's whole answer to that call. */
  response: unknown;
  /** The parsed, validated answer (a Standard Schema's output value). */
  output: O;
  /** Re-asks it took (0: the first answer fitted). */
  reasks: number;
}

export interface AiEmbedRequest extends AiRequest {
  model: string;
  /** Texts to embed, in order. */
  inputs: string[];
  /** Inputs per durable batch (one Infer step each: `<id>:batch-0`, `<id>:batch-1`, ...). @default 100 */
  batchSize?: number;
}

/** What `step.ai.embed` resolves with. */
export interface AiEmbedResult {
  /** One vector per input, in the order of `inputs`. */
  embeddings: number[][];
  /** The model the provider reports (first batch). */
  model?: string;
  /** Durable batches (Infer steps) it took. */
  batches: number;
}

/** The model response as the service completes the step. */
export interface AiResult {
  [key: string]: unknown;
  usage?: Usage;
}

export interface ScoreOptions {
  name: string;
  value: unknown;
  [key: string]: unknown;
}

/** What an eval's `score` returns per item: a number, or one with fields stored on the score row. */
export type AiEvalScore = number | { value: number; [key: string]: unknown };

interface AiEvalCommon<I> {
  /** Score name written for every item (the score row's `name`). */
  name: string;
  /** Items to evaluate. SPEC Limits: 200 eval items per run (all evals of the run together); items past that are left out and reported as truncated. */
  dataset: readonly I[];
}

/** An eval whose task runs in the runner: `task` is a durable step per item (`<id>:task-<i>`, like step.run). */
export interface AiEvalTaskOptions<I, O> extends AiEvalCommon<I> {
  task: (item: I, index: number) => O | Promise<O>;
  /**
   * Scores one item's output. Runs in the handler on every pass (not in a
   * step), so keep it a deterministic function of its arguments; the score
   * is written once per item (Score opcode, `<id>:score-<i>`).
   */
  score: (item: I, output: Awaited<O>, index: number) => AiEvalScore | Promise<AiEvalScore>;
}

/** An eval whose task is a model call the service makes: `step.ai.generate` per item (`<id>:generate-<i>`). */
export interface AiEvalGenerateOptions<I, O = unknown> extends AiEvalCommon<I> {
  generate: (item: I, index: number) => AiGenerateRequest;
  /** As for a task eval; `output` is the generate result (`output` parsed when the request set a schema). */
  score: (item: I, output: { text: string; response: unknown; output?: O; reasks?: number }, index: number) => AiEvalScore | Promise<AiEvalScore>;
}

/** What `step.ai.eval` resolves with. */
export interface AiEvalSummary {
  name: string;
  /** Items evaluated (at most what was left of the run's 200). */
  count: number;
  /** Items in the dataset. */
  total: number;
  /** True when items were left out (the run's 200 eval items were spent). */
  truncated: boolean;
  /** Mean of the scores; null for an empty dataset. */
  mean: number | null;
  /** Each item's score value, in dataset order. */
  scores: number[];
}

/** AI steps: the runner states the request, the service makes the call (Infer opcode) and memoizes it. */
export interface AiSteps {
  /**
   * A model call the service makes. With `output`, the answer is parsed and
   * validated (re-asked up to `reasks` times) and the result carries
   * `output`; once the re-asks are spent it rejects with an AiOutputError.
   */
  generate<S extends StandardSchemaV1>(id: string, request: AiGenerateRequest & { output: S }): Promise<AiGenerateResult<InferSchemaOutput<S>>>;
  generate<O = unknown>(id: string, request: AiGenerateRequest & { output: JsonSchema }): Promise<AiGenerateResult<O>>;
  generate<T = AiResult>(id: string, request: AiGenerateRequest): Promise<T>;
  infer<T = AiResult>(id: string, request: AiRequest): Promise<T>;
  /** Embeddings of `inputs`, one durable Infer step per `batchSize` inputs (openai-kind providers). */
  embed(id: string, request: AiEmbedRequest): Promise<AiEmbedResult>;
  /**
   * Runs a task over a dataset (its first items, up to 200 per run, in
   * parallel), writes one score per item and resolves with a summary.
   */
  eval<I, O>(id: string, options: AiEvalTaskOptions<I, O>): Promise<AiEvalSummary>;
  eval<I, O = unknown>(id: string, options: AiEvalGenerateOptions<I, O>): Promise<AiEvalSummary>;
  /**
   * A model call the runner makes itself, as a durable step: `call` runs like
   * step.run's function, and `usage` reads the call's SPEC Usage off its
   * result so the service records (and meters) it with the step.
   */
  wrap<T>(id: string, call: () => T | Promise<T>, usage: (result: T) => Usage | undefined): Promise<T>;
}

/** Durable building blocks. Every call is addressed by its step id. */
export interface StepTools {
  /**
   * Runs `fn` once per run and memoizes its result: on replay the saved
   * result (or failure) is returned without calling `fn` again.
   *
   * The result is JSON-normalised (`undefined` becomes `null`, a Date an
   * ISO string) so the first pass and every replay see the same value.
   * Repeated ids are disambiguated as `id`, `id:1`, `id:2`, ... in call
   * order, so call steps in a deterministic order.
   */
  run<T>(id: string, fn: () => T | Promise<T>, options?: StepRunOptions): Promise<Awaited<T>>;
  /** Parks the run for `duration` (`5000`, `"5m"`, `"1h30m"`). The service resolves the wake time once. */
  sleep(id: string, duration: Duration): Promise<void>;
  /** Parks the run until `until` (a Date, epoch ms, or an ISO string). A past time wakes at once. */
  sleepUntil(id: string, until: Date | number | string): Promise<void>;
  /** Parks until a matching event arrives (resolves with it) or the timeout passes (resolves with null). */
  waitForEvent<TData = unknown>(id: string, options: WaitForEventOptions): Promise<WorkflowEvent<TData> | null>;
  /** Starts a child run and resumes with its result; a failed child rejects with StepFailedError. */
  runWorkflow<TResult = unknown, TData = unknown>(id: string, options: RunWorkflowOptions<TData, TResult>): Promise<TResult>;
  /** Emits an event, exactly once per run and step id. Resolves with what the service recorded. */
  emit(id: string, options: EmitOptions): Promise<unknown>;
  /**
   * Asks for a human decision on a tool call and parks the run until it is
   * decided (or resolves at once when `if` / `minRisk` leave it ungated).
   * Run the tool with `decision.args`: they carry the decider's edits.
   */
  approval<A = unknown>(id: string, options: ApprovalOptions<A>): Promise<ApprovalDecision<A>>;
  /** Records a score for this run (evals), exactly once per step id. */
  score(id: string, options: ScoreOptions): Promise<unknown>;
  /**
   * Adds tags to this run (at most 10 a run, each 1-128 characters:
   * `tenant:acme`), exactly once per step id; resolves to the run's tags after
   * it. Past the tenth, the rest are not added. `runs.list({ tags })`, bulk
   * actions and webhook payloads see them from then on; runs started from this
   * one later (children, replays) take them too. An extension of SPEC.
   */
  tag(id: string, tags: string[]): Promise<string[]>;
  ai: AiSteps;
}

/** The triggering event as the handler sees it. */
export interface WorkflowEvent<TData = unknown> {
  name: string;
  data: TData;
}

/** Run identity plus side-effect helpers that live on ctx. */
export interface WorkflowCtx extends InvokeContext {
  webhook: {
    /** A durable outbound POST of `body` to `url`, exactly once per run and step id. */
    send(id: string, options: WebhookSendOptions): Promise<unknown>;
  };
}

/** What a workflow handler receives on every pass. */
export interface WorkflowContext<TData = unknown> {
  event: WorkflowEvent<TData>;
  step: StepTools;
  /** Run identity from the invoke body (`runId`, `attempt`, `error` on an onFailure run, ...) and ctx.webhook. */
  ctx: WorkflowCtx;
  logger: WorkflowLogger;
}

export type WorkflowHandler<TData = unknown, TResult = unknown> = (
  context: WorkflowContext<TData>,
) => TResult | Promise<TResult>;

/** Registration options of `runner.workflow`. */
export interface WorkflowOptions extends Omit<WorkflowRegistration, 'name' | 'onFailure'> {
  /**
   * Runs as a follow-on run when the workflow fails terminally; `ctx.error`
   * carries the error. Registered as `onFailure: true`.
   */
  onFailure?: WorkflowHandler;
  /**
   * A Standard Schema (zod, valibot, arktype, ...) for `event.data`: it types
   * the handler and validates every pass; invalid data fails the run.
   */
  schema?: StandardSchemaV1;
  /** Run-ahead budget of this workflow's passes, in ms (see RunnerOptions.stepBudgetMs). @default the runner's */
  stepBudgetMs?: number;
}

/** A workflow served by a runner. */
export interface Workflow<TData = unknown, TResult = unknown> {
  readonly name: string;
  readonly options: Readonly<WorkflowOptions>;
  readonly handler: WorkflowHandler<TData, TResult>;
  /** The entry of this workflow in the register body. */
  toRegistration(): WorkflowRegistration;
}
