/** The shapes the console reads, as GET /v1/openapi.json documents them. */

export type RunStatus = 'queued' | 'running' | 'waiting' | 'paused' | 'succeeded' | 'failed' | 'cancelled';
export const RUN_STATUSES: RunStatus[] = ['queued', 'running', 'waiting', 'paused', 'succeeded', 'failed', 'cancelled'];
export const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);

export interface StepError {
  message: string;
  stack?: string;
}

export interface Run {
  id: string;
  status: RunStatus;
  workflow: string;
  app: string;
  runner?: string;
  triggerKind: string;
  eventId?: string;
  eventName?: string;
  replayOf?: string;
  session?: string;
  /** Its triggering event's tags, or its source's (a replay, child or on-failure run); [] for none. */
  tags: string[];
  attempt: number;
  stepCount: number;
  createdAt: string;
  startedAt?: string;
  endedAt?: string;
  durationMs?: number;
  error?: StepError;
  needsAttention?: true;
}

export type WaitingFor =
  | { kind: 'sleep'; step: string; until: string }
  | { kind: 'event'; step: string; event: string; if?: string; timeoutAt?: string }
  | { kind: 'approval'; step: string; expiresAt?: string }
  | { kind: 'child'; step: string; childRunId?: string; workflow?: string }
  | { kind: 'model'; step: string }
  | { kind: 'concurrency'; key: string; limit: number; holding: number }
  | { kind: 'singleton'; key: string; activeRunId?: string }
  | { kind: 'throttle'; until: string }
  | { kind: 'no_runner'; since: string; failsAt: string; runner?: string }
  | { kind: 'paused'; by?: string; since?: string }
  | { kind: 'retry'; step: string; attempt: number; nextTryAt?: string; error?: StepError }
  | { kind: 'transport_retry'; failures: number; nextTryAt?: string }
  | { kind: 'scheduler'; since?: string }
  | { kind: 'running'; step?: string };

export interface RunDetail extends Run {
  input?: unknown;
  result?: unknown;
  usage?: { calls: number; tokensIn: number; tokensOut: number; cost?: number };
  waitingFor?: WaitingFor;
}

export interface RunStats {
  total: number;
  active: number;
  succeeded: number;
  failed: number;
  successRate: number;
}

export interface Step {
  id: string;
  name: string;
  op: string;
  index: number;
  status: string;
  attempts: number;
  input?: unknown;
  output?: unknown;
  error?: StepError;
  usage?: Record<string, unknown>;
  startedAt: string;
  endedAt?: string;
}

export interface LogLine {
  seq: number;
  ts: string;
  level: 'debug' | 'info' | 'warn' | 'error';
  message: string;
  fields?: Record<string, unknown>;
  scope: string;
  attempt: number;
}

export interface ControlAction {
  id: string;
  action: string;
  runId?: string;
  newRunId?: string;
  actor?: string;
  detail?: unknown;
  createdAt: string;
}

export interface Approval {
  id: string;
  runId: string;
  workflow: string;
  app: string;
  step: string;
  tool: string;
  args: unknown;
  risk?: string;
  policy?: string;
  summary?: string;
  context?: string;
  escalatesTo?: string;
  onTimeout: string;
  allow: string[];
  status: 'pending' | 'escalated' | 'approved' | 'denied' | 'cancelled';
  requestedAt: string;
  expiresAt?: string;
  decidedAt?: string;
  decidedBy?: string;
  decidedVia?: string;
  editedArgs?: unknown;
  response?: string;
}

export interface EventRecord {
  id: string;
  name: string;
  app?: string;
  source: 'api' | 'emit';
  data?: unknown;
  /** POST /events `tags`, given to the runs it starts; absent for none. */
  tags?: string[];
  receivedAt: string;
  /** Sent with a delay and not yet taken in: when it will be. */
  scheduledFor?: string;
  woke: number;
  triggered: { workflow: string; app: string; runId: string }[];
}

export interface WebhookEndpoint {
  id: string;
  name?: string;
  app?: string;
  url: string;
  scheme: string;
  eventKinds: string[];
  enabled: boolean;
  secret?: string;
}

export interface EndpointStats {
  endpointId: string;
  delivered: number;
  succeeded: number;
  failed: number;
  lastDelivery?: string;
}

export interface Delivery {
  id: string;
  app: string;
  endpointId?: string;
  url: string;
  eventKind: string;
  sourceRunId?: string;
  payload?: unknown;
  status: string;
  attemptCount: number;
  maxAttempts: number;
  lastStatusCode?: number;
  nextAttemptAt?: string;
  createdAt: string;
  updatedAt: string;
  attempts?: { id: string; attempt: number; outcome: string; statusCode?: number; responseSnippet?: string; error?: string; durationMs: number; createdAt: string }[];
}

export interface Receiver {
  id: string;
  name?: string;
  app?: string;
  targetApp?: string;
  slug: string;
  eventName: string;
  /** CEL over a post's body and headers: whether it becomes an event, and its name, data and dedupeId. */
  transform?: { if?: string; name?: string; data?: string; id?: string };
  scheme: string;
  enabled: boolean;
  secret?: string;
}

export interface SourceDelivery {
  id: string;
  receiverId?: string;
  slug?: string;
  outcome?: string;
  reason?: string;
  eventId?: string;
  createdAt: string;
  [k: string]: unknown;
}

export interface Runner {
  id: string;
  app: string;
  url: string;
  live: boolean;
  keyMatch: boolean;
  lastSeen: string;
  runtime?: string;
  language?: string;
  version?: string;
  transport?: string;
  [k: string]: unknown;
}

export interface Workflow {
  name: string;
  app: string;
  retry?: unknown;
  scheduled: boolean;
  schedules: string[];
  triggers?: { event?: string; if?: string; cron?: string }[];
  steps?: { name: string; description?: string; hidden?: boolean }[];
  /** Paused by an operator: its events and cron ticks start no run (with hold, its events' runs start once resumed). */
  paused?: { at: string; by: string; hold?: true };
  [k: string]: unknown;
}

/** A schedule made through the API (GET /v1/schedules). */
export interface Schedule {
  id: string;
  app: string;
  workflow: string;
  cron: string;
  timezone: string;
  data?: unknown;
  externalId?: string;
  /** Tags of the runs it starts. */
  tags: string[];
  /** Paused: its ticks start no run until resumed (and it has no nextRunAt). */
  paused?: { at: string; by: string };
  nextRunAt?: string;
  lastRunAt?: string;
  createdBy: string;
}
