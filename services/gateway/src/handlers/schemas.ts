import { z } from 'zod';
import { LIMITS, type LimitName } from '../domain/usage.js';
import { MAX_TAG_LENGTH, MAX_TAGS, unknownEventFields } from '@dws/protocol';
import { DEFAULT_RETENTION_DAYS, RETENTION_DAYS_RANGE } from '@dws/runtime';

/**
 * The zod schemas of the public API. The gateway validates path params,
 * query strings and bodies with them before forwarding a call, and the
 * OpenAPI document at /v1/openapi.json is generated from the very same
 * objects, so the document cannot drift from what is enforced. Response
 * schemas describe what the owning services answer (documentation only).
 */
export const registry = z.registry<{ id: string; description?: string; minProperties?: number }>();

export function component<T extends z.ZodType>(id: string, schema: T, description?: string, extra: { minProperties?: number } = {}): T {
  registry.add(schema, { id, ...(description ? { description } : {}), ...extra });
  return schema;
}

/** Postgres text cannot hold NUL: a value with one names nothing, so it is refused before any service sees it. */
export const str = () => z.string().regex(/^[^\u0000]*$/, 'must not contain NUL characters');

/** SPEC Limits: names and ids are at most 256 characters. */
export const name = (description?: string) => (description ? str().min(1).max(256).meta({ description }) : str().min(1).max(256));
export const json = (description: string) => z.unknown().meta({ description });
export const timestamp = (description?: string) => z.string().meta({ format: 'date-time', ...(description ? { description } : {}) });

/** Page size: an integer of at least 1; over `max` is clamped to `max` (SPEC Limits). */
export const limit = (def: number, max: number) =>
  z.coerce
    .number()
    .int()
    .min(1)
    .max(Number.MAX_SAFE_INTEGER)
    .transform((n) => Math.min(n, max))
    .optional()
    .meta({ description: `Page size, 1-${max} (default ${def}); a larger value is clamped to ${max}.` });

const seqFrom = z.coerce
  .number()
  .int()
  .min(0)
  .max(Number.MAX_SAFE_INTEGER)
  .optional()
  .meta({ description: 'Exclusive lower bound on seq (default 0).' });

const since = z.iso.datetime({ offset: true }).optional().meta({ description: 'RFC 3339; only runs started at or after it.' });
const until = z.iso.datetime({ offset: true }).optional().meta({ description: 'RFC 3339; only runs started before it.' });
const tagSchema = str().min(1).max(MAX_TAG_LENGTH);
const filterTags = z.array(tagSchema).min(1).max(MAX_TAGS).optional().meta({ description: 'Runs carrying every one of these tags.' });
/** A list's `tag` query parameter: given once a string, repeated an array (every one given must be carried). */
const tagParam = (what: string) =>
  z
    .union([tagSchema, z.array(tagSchema).max(MAX_TAGS)])
    .optional()
    .meta({ description: `${what} carrying this tag; repeat the parameter (tag=a&tag=b) for ${what.toLowerCase()} carrying every one given.` });

export const RUN_STATUSES = ['queued', 'running', 'waiting', 'paused', 'succeeded', 'failed', 'cancelled'] as const;
export const RUN_SORTS = ['started', 'workflow', 'status', 'app', 'duration'] as const;
export const CONTROL_ACTIONS = ['cancel', 'pause', 'resume', 'replay', 'retry_from_step', 'bulk_replay'] as const;

// ---- components

export const ErrorBody = component(
  'Error',
  z.object({ error: z.object({ code: z.string().meta({ description: 'snake_case, stable' }), message: z.string() }) }),
  'Every 4xx and 5xx answer (CONTRACT.md).',
);

const runFields = {
  id: z.string(),
  status: z.enum(RUN_STATUSES),
  workflow: z.string(),
  app: z.string(),
  runner: z.string().optional().meta({ description: 'Pinned runner id; absent for anycast.' }),
  triggerKind: z.string().meta({ description: 'event or cron (child, replay and on-failure runs name their origin).' }),
  eventId: z.string().optional().meta({ description: 'Only on event-triggered runs: the event-log record that fanned out the run.' }),
  eventName: z.string().optional(),
  replayOf: z.string().optional().meta({ description: 'Source run of a replay, retry-from-step or bulk replay.' }),
  session: z.string().optional().meta({ description: 'Session of the event that started the run.' }),
  tags: z.array(z.string()).meta({
    description: "Its triggering event's tags (all of its batch's events', at most 10), or its source's for a replay, child or on-failure run; GET /runs?tag= filters by them.",
  }),
  attempt: z.number().int(),
  stepCount: z.number().int(),
  createdAt: timestamp('When the run was started by its trigger; sort=started and since use it.'),
  startedAt: timestamp('When the scheduler first drove it.').optional(),
  endedAt: timestamp('When it reached a terminal status.').optional(),
  durationMs: z.number().int().optional().meta({ description: 'endedAt - startedAt, once finished.' }),
  error: z.object({ message: z.string(), stack: z.string().optional() }).optional(),
  needsAttention: z
    .literal(true)
    .optional()
    .meta({
      description:
        "SPEC's needs_attention state: present and true while the run is parked on an open (pending or escalated) approval; absent otherwise. " +
        'The status stays `waiting`; GET /approvals?runId= lists the approval to decide.',
    }),
};

export const Run = component('Run', z.object(runFields), 'A run summary, as listed by GET /runs.');
/** Totals of SPEC Usage records (model calls of AI steps, and StepRuns that reported one). */
const usageTotals = {
  calls: z.number().int(),
  tokensIn: z.number(),
  tokensOut: z.number(),
  cost: z.number().optional().meta({ description: 'Present when some call was priced.' }),
};
const stepError = z.object({ message: z.string(), stack: z.string().optional() });
/** "Why is it not moving?" (services/scheduler/src/domain/waiting-for.ts): one variant per reason a run can wait. */
export const WaitingFor = component(
  'WaitingFor',
  z.discriminatedUnion('kind', [
    z.object({ kind: z.literal('paused'), by: z.string().optional().meta({ description: 'Actor of the last pause in the control audit.' }), since: timestamp().optional() }),
    z.object({
      kind: z.literal('no_runner'),
      since: timestamp('Since when no live runner could take it.'),
      failsAt: timestamp('When it fails unless a runner registers (5 minutes after since).'),
      runner: z.string().optional().meta({ description: 'The pinned runner id, for a pinned run.' }),
    }),
    z.object({ kind: z.literal('retry'), step: z.string(), attempt: z.number().int().meta({ description: 'Attempts made so far.' }), nextTryAt: timestamp().optional(), error: stepError.optional() }),
    z.object({ kind: z.literal('approval'), step: z.string().meta({ description: 'Approval step; GET /approvals?runId= lists it.' }) }),
    z.object({ kind: z.literal('event'), step: z.string(), event: z.string(), if: z.string().optional().meta({ description: 'CEL the event must satisfy.' }), timeoutAt: timestamp().optional() }),
    z.object({ kind: z.literal('child'), step: z.string(), childRunId: z.string().optional(), workflow: z.string().optional() }),
    z.object({ kind: z.literal('model'), step: z.string().meta({ description: 'An AI step whose model call the service is making.' }) }),
    z.object({ kind: z.literal('sleep'), step: z.string(), until: timestamp() }),
    z.object({ kind: z.literal('transport_retry'), failures: z.number().int(), nextTryAt: timestamp().optional() }),
    z.object({
      kind: z.literal('concurrency'),
      key: z.string(),
      limit: z.number().int(),
      holding: z.number().int().meta({ description: 'Runs holding a slot of the key now: executing, or with a model call the service makes for them out (a run that sleeps or waits gives its slot back).' }),
    }).meta({ description: 'Queued for a slot, or due again after a sleep or a wait and waiting for one (status waiting).' }),
    z.object({
      kind: z.literal('singleton'),
      key: z.string(),
      activeRunId: z.string().optional().meta({ description: 'The run of the key active now, which this one waits behind.' }),
    }).meta({ description: "Queued behind its key's active run (singleton mode queue): it starts when that run ends." }),
    z.object({ kind: z.literal('throttle'), until: timestamp('Not before this time.') }),
    z.object({ kind: z.literal('scheduler'), since: timestamp().meta({ description: 'Due, waiting for a scheduler replica with room.' }) }),
    z.object({ kind: z.literal('running') }),
  ]),
  'What a non-terminal run waits for, from the scheduler\'s own data.',
);
export const RunDetail = component(
  'RunDetail',
  z.object({
    ...runFields,
    input: json('The triggering payload.'),
    result: json('What the handler returned, once succeeded.'),
    usage: z.object(usageTotals).optional().meta({ description: 'Totals of the model calls its steps recorded (absent when none).' }),
    waitingFor: WaitingFor.optional().meta({ description: 'Why it is not moving: present on a non-terminal run only.' }),
  }),
  'One run, with input and result.',
);
export const Step = component(
  'Step',
  z.object({
    id: z.string().meta({ description: 'Hashed step id.' }),
    name: z.string(),
    op: z.string(),
    index: z.number().int(),
    status: z.string(),
    attempts: z.number().int(),
    input: json('Declared step input.').optional(),
    output: json('Step result.').optional(),
    error: z.object({ message: z.string(), stack: z.string().optional() }).optional(),
    usage: z
      .object({ model: z.string(), tokensIn: z.number(), tokensOut: z.number(), cost: z.number(), latencyMs: z.number(), cacheHit: z.boolean() })
      .partial()
      .optional()
      .meta({ description: 'SPEC Usage of the model call an AI step made (cacheHit only when the inference cache was engaged).' }),
    childRunId: z.string().optional().meta({ description: 'The child run of a RunWorkflow step.' }),
    startedAt: timestamp(
      "When the step began: for a run step, when its code began (its first attempt's, as the runner's `startedAtMs` says, kept within the pass; a runner that does not say: when the pass, or the checkpoint before it, reached the runner); for any other step, when it was recorded.",
    ),
    endedAt: timestamp('When its result was stored; absent while it is parked or retrying.').optional(),
  }),
);
export const Score = component(
  'Score',
  z
    .object({
      id: z.string(),
      runId: z.string(),
      step: z.string().meta({ description: 'Name of the Score step that wrote it.' }),
      name: z.string(),
      value: json('The score.'),
      createdAt: timestamp(),
    })
    .catchall(z.unknown())
    .meta({ description: "One score a run's step.score wrote; other fields the runner attached ride along." }),
);
const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export const LogLine = component(
  'LogLine',
  z.object({
    seq: z.number().int(),
    ts: timestamp('When the service persisted the line.'),
    level: z.enum(LOG_LEVELS),
    message: z.string(),
    fields: z.record(z.string(), z.unknown()).optional(),
    scope: z.string().meta({ description: 'Step name, or @root.' }),
    attempt: z.number().int(),
  }),
);
export const RunStats = component(
  'RunStats',
  z.object({
    total: z.number().int(),
    active: z.number().int().meta({ description: 'queued + running + waiting' }),
    succeeded: z.number().int(),
    failed: z.number().int(),
    successRate: z.number().int().meta({ description: 'succeeded / (succeeded + failed), whole percent (floored); 100 when nothing has finished.' }),
  }),
);
export const TimelineFrame = component(
  'TimelineFrame',
  z.looseObject({
    kind: z.enum(['run_status', 'step_status', 'log']),
    seq: z.number().int(),
    ts: timestamp(),
    runId: z.string(),
    status: z.string().optional().meta({ description: 'run_status, step_status' }),
    name: z.string().optional().meta({ description: 'step_status' }),
    attempt: z.number().int().optional(),
    level: z.enum(LOG_LEVELS).optional().meta({ description: 'log' }),
    message: z.string().optional().meta({ description: 'log' }),
    scope: z.string().optional().meta({ description: 'log' }),
  }),
  'One SSE frame of GET /runs/{id}/stream: `id:` is seq, `event:` is kind, `data:` this JSON.',
);
export const RunStatusFrame = component(
  'RunStatusFrame',
  z.looseObject({ kind: z.literal('run_status'), ts: timestamp(), runId: z.string(), status: z.enum(RUN_STATUSES), workflow: z.string(), app: z.string() }),
  'One SSE frame of GET /runs/stream (best-effort, no seq).',
);
export const ControlAction = component(
  'ControlAction',
  z.object({
    id: z.string(),
    action: z.enum(CONTROL_ACTIONS),
    runId: z.string().optional(),
    newRunId: z.string().optional(),
    actor: z.string().optional(),
    detail: json('Action-specific context.').optional(),
    createdAt: timestamp(),
  }),
);
export const APPROVAL_STATUSES = ['pending', 'escalated', 'approved', 'denied', 'cancelled'] as const;
export const APPROVAL_DECISIONS = ['approve', 'edit', 'reject', 'respond'] as const;
export const DECIDED_VIA = ['console', 'mcp', 'api', 'timeout', 'unrecorded'] as const;

export const Approval = component(
  'Approval',
  z.object({
    id: z.string(),
    runId: z.string().meta({ description: 'The run parked on it.' }),
    workflow: z.string().meta({ description: 'Joined from the run.' }),
    app: z.string().meta({ description: 'Joined from the run.' }),
    step: z.string().meta({ description: 'Name of the approval step in the workflow.' }),
    tool: z.string().meta({ description: 'Proposed action awaiting sign-off.' }),
    args: json('Proposed arguments of the tool call.'),
    risk: z.string().optional().meta({ description: 'Declared risk level (low < medium < high < critical orders the minRisk gate).' }),
    policy: z.string().optional(),
    summary: z.string().optional(),
    context: z.string().optional(),
    escalatesTo: z.string().optional().meta({ description: 'Escalation target once expiresAt passes under onTimeout escalate.' }),
    onTimeout: z.enum(['escalate', 'approve', 'reject', 'fail']).meta({ description: 'What happens at expiresAt (default escalate).' }),
    allow: z.array(z.enum(APPROVAL_DECISIONS)).meta({
      description:
        'Decisions offered: approve, edit (approve with `args`), reject (deny), respond (a free-text `response` with the decision). All four when the step did not limit them.',
    }),
    status: z.enum(APPROVAL_STATUSES).meta({ description: 'pending and escalated are open; cancelled is terminal with no decision on record.' }),
    requestedAt: timestamp(),
    expiresAt: timestamp('When onTimeout fires; absent without a timeout.').optional(),
    decidedAt: timestamp('Absent while open.').optional(),
    decidedBy: z.string().optional().meta({ description: 'X-Service-Actor of a console key, else the key name; system:timeout for a timeout decision.' }),
    decidedVia: z.enum(DECIDED_VIA).optional().meta({
      description: 'console (a console key naming a person), mcp (through /mcp), api (any other key), timeout (onTimeout approve or reject), unrecorded (authentication off).',
    }),
    editedArgs: json("The decider's replacement arguments (approve with edits); the workflow receives them.").optional(),
    response: z.string().optional().meta({ description: 'The free-text answer sent with the decision (allow includes respond).' }),
  }),
  'A human sign-off a run is parked on. Absent fields are omitted, never null.',
);

export const NewRun = component('NewRun', z.looseObject({ id: z.string(), status: z.enum(RUN_STATUSES) }), 'The run a replay created.');
export const BulkReplayResult = component(
  'BulkReplayResult',
  z.object({ matched: z.number().int(), replayed: z.number().int(), skipped: z.number().int(), failed: z.number().int(), capped: z.boolean() }),
);
export const BulkCancelResult = component(
  'BulkCancelResult',
  z.object({
    matched: z.number().int().meta({ description: 'Runs that have not ended matching the filter; with `if`, those of the runs read where it held.' }),
    cancelled: z.number().int(),
    skipped: z.number().int().meta({ description: 'Ended before the cancel reached them.' }),
    failed: z.number().int(),
    capped: z.boolean().meta({ description: 'More runs may match than this call cancelled: call again.' }),
  }),
);
export const EventRecord = component(
  'Event',
  z.object({
    id: z.string(),
    name: z.string(),
    app: z.string().optional(),
    source: z.enum(['api', 'emit']),
    data: json('Payload.'),
    tags: z.array(z.string()).optional().meta({ description: 'As posted: the runs it starts carry them.' }),
    receivedAt: timestamp(),
    scheduled: z
      .literal(true)
      .optional()
      .meta({ description: 'Posted with a delay and not yet taken in: until scheduledFor it has woken nothing and started nothing.' }),
    scheduledFor: timestamp('Posted with a delay: when it is (or was) to be taken in; receivedAt is when it was taken in, once it has been.').optional(),
    woke: z.number().int(),
    triggered: z.array(z.object({ workflow: z.string(), app: z.string(), runId: z.string() })),
  }),
);
export const CancelledEvent = component(
  'CancelledEvent',
  EventRecord.extend({ cancelled: z.literal(true) }),
  'The delayed event as it was stored: it will not be taken in.',
);
export const IngestResult = component(
  'IngestResult',
  z.looseObject({
    runId: z.string().optional(),
    woke: z.number().int(),
    triggered: z.array(
      z.looseObject({
        workflow: z.string(),
        app: z.string(),
        runId: z.string().optional().meta({ description: 'Absent when no run starts for it: dropped, skipped, deduped, suspended or paused.' }),
        paused: z.literal(true).optional().meta({ description: 'The workflow is paused (POST /workflows/pause): the event starts no run of it now.' }),
        held: z.literal(true).optional().meta({ description: 'Paused with hold: the match is kept, and its run starts once the workflow is resumed.' }),
      }),
    ),
    skipped: z.boolean(),
    dropped: z.boolean(),
    debounced: z.boolean(),
    batched: z.boolean(),
    deduped: z.boolean(),
    suspended: z.boolean(),
    scheduled: z.boolean().optional().meta({ description: 'Posted with a delay: stored, to be taken in at scheduledFor (nothing woken or started yet).' }),
    scheduledFor: timestamp('When the delayed event will be taken in.').optional(),
  }),
);
export const Runner = component(
  'Runner',
  z.looseObject({ id: z.string(), app: z.string(), url: z.string(), live: z.boolean(), keyMatch: z.boolean(), lastSeen: timestamp() }),
);
export const Workflow = component(
  'Workflow',
  z.looseObject({
    name: z.string(),
    app: z.string(),
    retry: json('Retry policy.'),
    scheduled: z.boolean(),
    schedules: z.array(z.string()),
    paused: z
      .object({
        at: timestamp(),
        by: z.string(),
        hold: z.literal(true).optional().meta({ description: 'Its events are held: their runs start once it is resumed.' }),
      })
      .optional()
      .meta({ description: 'Paused by an operator (when, and the key or person): its events and cron ticks start no run until resumed.' }),
  }),
);
export const ScheduleBody = component(
  'ScheduleBody',
  z.strictObject({
    app: name('The app the workflow is registered under.'),
    workflow: name('The workflow each tick starts a run of.'),
    cron: str().min(1).max(256).meta({ description: 'Five fields, or six with seconds first ("0 9 * * *"); a `TZ=Zone ` prefix or `timezone` sets the zone (UTC by default).' }),
    timezone: str().max(64).optional().meta({ description: 'IANA zone of the pattern, e.g. "Europe/Paris".' }),
    data: json('Handed to every run as event.data.data.').optional(),
    externalId: name('Your id for it (a tenant, a user): making it again with this id replaces it (a paused one stays paused).').optional(),
    tags: z.array(tagSchema).max(MAX_TAGS).optional().meta({ description: 'Tags of the runs it starts (GET /runs?tag= finds them).' }),
  }),
);
export const Schedule = component(
  'Schedule',
  z.object({
    id: z.string(),
    app: z.string(),
    workflow: z.string(),
    cron: z.string(),
    timezone: z.string(),
    data: json('Handed to every run as event.data.data.'),
    externalId: z.string().optional(),
    tags: z.array(z.string()).meta({ description: 'Tags of the runs it starts.' }),
    paused: z
      .object({ at: timestamp(), by: z.string() })
      .optional()
      .meta({ description: 'Paused (POST /schedules/{id}/pause): when, and the key or person; its ticks start no run until resumed.' }),
    nextRunAt: timestamp('The next tick; absent while paused and once the pattern never fires again.').optional(),
    lastRunAt: timestamp('The last tick that fired.').optional(),
    createdBy: z.string(),
    createdAt: timestamp(),
    updatedAt: timestamp(),
  }),
  'Each tick starts a run of the workflow (trigger kind cron) whose event.data is { cron, scheduledAt, scheduleId, externalId?, data }.',
);
export const SchedulesQuery = component(
  'SchedulesQuery',
  z.object({ app: name('Restrict to one app.').optional(), workflow: name('Restrict to one workflow.').optional(), limit: limit(100, 1000) }),
);
export const WorkflowRef = component(
  'WorkflowRef',
  z.strictObject({ app: name('The app the workflow is registered under.'), workflow: name('The workflow name.') }),
);
export const PauseWorkflowBody = component(
  'PauseWorkflowBody',
  WorkflowRef.extend({
    hold: z
      .boolean()
      .optional()
      .meta({
        description:
          'Hold its events: each match is kept and admitted, in arrival order and under the flow control of that moment, once it is resumed ' +
          '(Trigger.dev and Hatchet queue while paused). Without it, events sent while it is paused start no run of it, ever (Inngest).',
      }),
  }),
);
export const Workspace = component(
  'Workspace',
  z.object({
    id: z.string(),
    name: z.string(),
    suspended: z.boolean(),
    suspendedReason: z
      .enum(['operator', 'usage_limit'])
      .nullable()
      .meta({ description: 'operator: suspended by PATCH; usage_limit: a limit was reached (lifted when the month turns or the limit is raised or removed). null when not suspended.' }),
    limits: z.record(z.string(), z.unknown()),
    providers: z
      .partialRecord(z.enum(['anthropic', 'openai']), z.object({ baseUrl: z.string().optional(), apiKeySet: z.boolean() }))
      .meta({ description: 'The workspace\'s own model providers (keys never shown).' }),
    retentionDays: z
      .number()
      .int()
      .meta({ description: 'Days the workspace keeps its history (ended runs, events, deliveries, audit rows); 30 unless set.' }),
    usage: z
      .object({
        month: z.string().meta({ description: 'Current UTC month, YYYY-MM.' }),
        runs: z.number().int().meta({ description: 'Runs that ended in it.' }),
        model: z
          .object({ tokens: z.number(), cost: z.number() })
          .optional()
          .meta({
            description:
              "The month's model usage when a model call was last refused at the workspace's model ceiling (absent until one was); GET /v1/usage has the live figure.",
          }),
      })
      .meta({ description: 'What the limits are measured against.' }),
    createdAt: timestamp(),
  }),
);
export const CreatedWorkspace = component(
  'CreatedWorkspace',
  z.object({ id: z.string(), name: z.string(), secretKey: z.string(), publicKey: z.string(), consoleKey: z.string(), signingKey: z.string() }),
  'Keys are shown once.',
);
export const CreatedKey = component('CreatedKey', z.object({ id: z.string(), kind: z.enum(['secret', 'public', 'console']), name: z.string(), key: z.string() }));

// ---- requests

export const IdParams = z.object({ id: name('Resource id.') });
export const KeyParams = z.object({ id: name('Workspace id.'), keyId: name('Key id.') });

export const ListRunsQuery = component(
  'ListRunsQuery',
  z.object({
    app: name('Restrict to one app.').optional(),
    workflow: name("The workflow's exact name.").optional(),
    status: z.enum(RUN_STATUSES).optional().meta({ description: 'running also matches waiting.' }),
    runType: z.enum(['event', 'cron']).optional(),
    eventId: name('Runs that one event fanned out.').optional(),
    replayOf: name('Runs forked from one source run.').optional(),
    tag: tagParam('Runs'),
    q: name('Case-insensitive substring of workflow name, run id or app.').optional(),
    deep: z.enum(['0', '1', 'true', 'false']).optional().meta({ description: '1 widens q to run input, result and error.' }),
    since,
    until,
    sort: z.enum(RUN_SORTS).optional().meta({ description: 'Default started.' }),
    dir: z.enum(['asc', 'desc']).optional().meta({ description: 'Default desc.' }),
    limit: limit(30, 200),
    cursor: str().min(1).max(2048).optional().meta({ description: 'X-Next-Cursor of the previous page; tied to its sort and dir.' }),
  }),
);
export const StatsQuery = component('RunStatsQuery', z.object({ app: name('Restrict to one app.').optional(), since }));
export const LogsQuery = component('LogsQuery', z.object({ from: seqFrom, limit: limit(100, 1000) }));
export const SessionsQuery = component('SessionsQuery', z.object({ limit: limit(100, 500) }));
export const UsageQuery = component(
  'UsageQuery',
  z.object({ since: z.iso.datetime({ offset: true }).optional().meta({ description: 'RFC 3339; runs created at or after it (default: the start of the current UTC month).' }) }),
);
export const UsageReport = component(
  'UsageReport',
  z.object({
    since: timestamp(),
    ...usageTotals,
    models: z.array(z.object({ model: z.string(), ...usageTotals })),
  }),
  "The workspace's model usage: every AI step's call and every StepRun that reported one, in total and per model.",
);
export const Session = component(
  'Session',
  z.object({
    id: z.string(),
    runs: z.number().int().meta({ description: 'Runs started by events of the session.' }),
    firstSeenAt: timestamp(),
    lastSeenAt: timestamp(),
    usage: z.object(usageTotals).meta({ description: 'Model calls its runs made (AI steps) and their tokens; cost when priced.' }),
    scores: z.array(z.object({ name: z.string(), count: z.number().int(), average: z.number().nullable() })).meta({ description: 'Its runs\' scores by name: how many, and the average of the numeric ones.' }),
  }),
);
export const StreamQuery = component('RunStreamQuery', z.object({ from: seqFrom }));
/** Longest wait of one GET /runs/{id}/wait: under the idle timeout of the proxies in front of most deployments. */
export const MAX_RUN_WAIT_MS = 60_000;
export const RunWaitQuery = component(
  'RunWaitQuery',
  z.object({
    timeoutMs: z.coerce
      .number()
      .int()
      .min(0)
      .max(Number.MAX_SAFE_INTEGER)
      .transform((n) => Math.min(n, MAX_RUN_WAIT_MS))
      .optional()
      .meta({ description: `How long to wait for the run to end, in ms (default 30000); over ${MAX_RUN_WAIT_MS} is clamped to ${MAX_RUN_WAIT_MS}.` }),
  }),
);
export const ControlActionsQuery = component(
  'ControlActionsQuery',
  z.object({
    action: z.enum(CONTROL_ACTIONS).optional(),
    runId: name('Entries that target the run or fork into it.').optional(),
    limit: limit(100, 1000),
  }),
);
export const ListEventsQuery = component(
  'ListEventsQuery',
  z.object({ app: name('Restrict to one app.').optional(), name: name('Only events of this name.').optional(), limit: limit(100, 1000) }),
);
export const EventLogQuery = component(
  'EventLogQuery',
  ListEventsQuery.extend({
    tag: tagParam('Events'),
  }),
);
export const HeldEventsQuery = component(
  'HeldEventsQuery',
  z.object({ app: name("Only the held events of this app's workflows.").optional(), workflow: name('Only those held for this workflow.').optional(), limit: limit(100, 1000) }),
);
export const HeldEvent = component(
  'HeldEvent',
  z.object({
    workflow: z.string().meta({ description: 'The workflow, paused with hold, the event is kept for.' }),
    app: z.string(),
    heldAt: timestamp(),
    event: EventRecord,
  }),
  'An event a workflow paused with hold keeps: its run starts once the workflow is resumed.',
);
export const ListApprovalsQuery = component(
  'ListApprovalsQuery',
  z.object({
    status: z.enum(APPROVAL_STATUSES).optional().meta({ description: 'Only approvals in this status (default all).' }),
    runId: name('Only the approvals of this run.').optional(),
    limit: limit(100, 1000),
  }),
);
export const DecisionBody = component(
  'DecisionBody',
  z.looseObject({
    status: z.enum(['approved', 'denied']),
    args: json('With approved: replaces the proposed args (kept as editedArgs); needs allow to include edit. Refused with denied.').optional(),
    response: str().max(65_536).optional().meta({ description: 'A free-text answer the workflow receives; needs allow to include respond.' }),
  }),
  'decidedBy and decidedVia come from the authenticated caller; body fields of those names are ignored.',
);
/**
 * One JSON-RPC 2.0 message or a batch, checked here only so a body that is
 * none gets the API's error body; the MCP transport parses it fully.
 */
const JsonRpcMessage = z.looseObject({
  jsonrpc: z.literal('2.0'),
  method: str().max(256).optional(),
  id: z.union([z.string(), z.number()]).optional(),
});
export const McpMessage = component(
  'McpMessage',
  z.union([JsonRpcMessage, z.array(JsonRpcMessage).min(1).max(100)]),
  'A Model Context Protocol JSON-RPC message (or a batch): initialize, tools/list, tools/call, ...',
);

export const AppQuery = component('AppQuery', z.object({ app: name('Restrict to one app.').optional() }));

export const ReplayBody = component(
  'ReplayBody',
  z.object({ input: json('Replaces the payload; absent replays verbatim.').optional() }),
);
export const RetryFromStepBody = component('RetryFromStepBody', z.object({ step: name('Name of the step to resume at.') }));
export const BulkReplayBody = component(
  'BulkReplayBody',
  z
    .strictObject({
      app: name().optional(),
      workflow: name().optional(),
      status: z.enum(['succeeded', 'failed', 'cancelled']).optional(),
      runType: z.enum(['event', 'cron']).optional(),
      tags: filterTags,
      since,
      until,
    })
    .refine((b) => Object.values(b).some((v) => v !== undefined), { message: 'at least one filter field is required' }),
  'At least one field is required; any other field is a 400 (left out, it would widen the filter).',
  { minProperties: 1 },
);
export const BulkCancelBody = component(
  'BulkCancelBody',
  z
    .strictObject({
      app: name().optional(),
      workflow: name().optional(),
      status: z.enum(['queued', 'running', 'waiting', 'paused']).optional().meta({ description: 'running matches waiting too, as in GET /runs.' }),
      runType: z.enum(['event', 'cron']).optional(),
      tags: filterTags,
      since,
      until,
      if: z.string().min(1).optional().meta({ description: "CEL over `event` (the run's triggering event: name, data); only the runs it holds for are cancelled." }),
    })
    .refine((b) => Object.values(b).some((v) => v !== undefined), { message: 'at least one filter field is required' }),
  'At least one field is required; any other field is a 400 (left out, it would widen the filter).',
  { minProperties: 1 },
);

const EventIn = z.strictObject(
  {
    name: str().max(256).regex(/\S/, 'must not be blank').meta({ description: 'Event name; matched against triggers and waiters.' }),
    app: str().max(256).optional(),
    data: json('Payload (any JSON).').optional(),
    dedupeId: str().max(256).optional().meta({ description: 'A repeat of the same id (per app) within 24 h is dropped: deduped true.' }),
    runner: str().max(256).optional(),
    targetApp: str().max(256).optional(),
    session: str().max(256).optional().meta({ description: 'Session the runs this event starts join (GET /sessions groups them).' }),
    tags: z
      .array(tagSchema)
      .max(MAX_TAGS)
      .optional()
      .meta({ description: 'Tags of the runs this event starts (tenant:acme, user:42): GET /runs?tag= finds them, and their replays, children and on-failure runs carry them too.' }),
    delay: z
      .union([z.number().int().min(0), str().max(64)])
      .optional()
      .meta({
        description:
          'Take the event in later: a duration (ms, or text like "30s", "2h", "1d") or an RFC 3339 timestamp, at most a year ahead. ' +
          'Until then it is stored (GET /events/scheduled), wakes nothing and starts nothing, and can be cancelled (POST /events/{id}/cancel); ' +
          'then its waiters wake and its triggers start runs as though it were posted then. A time already past takes it in now.',
      }),
  },
  // Any other field (Inngest's id or ts, say) is refused rather than silently ignored.
  { error: (iss) => (iss.code === 'unrecognized_keys' ? unknownEventFields(iss.keys) : undefined) },
);
export const EventBody = component(
  'EventBody',
  z.union([EventIn, z.array(z.unknown().meta({ description: 'An event object; an invalid one gets its own error result.' })).min(1).max(100)]),
  'One event, or an array of up to 100.',
);
export const CheckpointBody = component(
  'CheckpointBody',
  z.object({
    token: str().max(200).meta({ description: 'ctx.checkpoint of the invoke whose pass finished these steps.' }),
    opcodes: z
      .array(z.looseObject({ op: z.literal('StepRun'), id: str().max(64), name: str().max(1024) }))
      .min(1)
      .max(1000)
      .meta({ description: 'Successful StepRun opcodes (SPEC Opcode), each finished in this pass.' }),
    logs: z.array(z.looseObject({})).max(1000).optional().meta({ description: 'Runner log lines since the previous checkpoint (SPEC Runner log line).' }),
  }),
);
export const CheckpointStored = component('CheckpointStored', z.object({ stored: z.literal(true) }));

export const RegisterBody = component(
  'RegisterBody',
  z.looseObject({
    app: name('App served.'),
    url: str().max(2048).meta({ description: "The runner's invoke endpoint." }),
    runner: name('Stable runner id.').optional(),
    protocolVersion: z.number().optional(),
    workflows: z.array(z.looseObject({ name: name('Workflow name.') })),
  }),
);
export const CreateWorkspaceBody = component('CreateWorkspaceBody', z.object({ name: name('Workspace name.') }));
export const CreateKeyBody = component(
  'CreateKeyBody',
  z.object({ kind: z.enum(['secret', 'public', 'console']), name: name('Label of the key in the audit log.') }),
);
const ProviderPatch = z.strictObject({
  baseUrl: z.url({ protocol: /^https?$/ }).max(2048).nullable().optional().meta({ description: 'The provider API\'s base URL (absolute http(s)).' }),
  apiKey: z.string().min(1).max(4096).nullable().optional().meta({ description: 'Write-only: shown as apiKeySet.' }),
});
/**
 * The recognised limits (domain/usage.ts LIMITS), one optional field each: a
 * positive number (an integer where the limit counts) sets it, null removes
 * it; any other name is a 400.
 */
const LimitsBody = z
  .strictObject(
    Object.fromEntries(
      Object.entries(LIMITS).map(([limitName, { integer, description }]) => [
        limitName,
        (integer ? z.number().int() : z.number())
          .positive()
          .nullable()
          .optional()
          .meta({ description: `${description} A positive ${integer ? 'integer' : 'number'}; null removes it.` }),
      ]),
    ) as Record<LimitName, z.ZodOptional<z.ZodNullable<z.ZodNumber>>>,
  )
  .meta({
    description:
      `Merged into the current limits; a null value removes that limit. Recognised: ${Object.keys(LIMITS).join(', ')}; any other name is refused with 400. ` +
      'A workspace whose metered usage reaches a limit is suspended (suspendedReason usage_limit: POST /events answers suspended true, run-creating calls 403); ' +
      'raising or removing the limit lifts that suspension when usage is under it again, and so does the next UTC month. An operator suspension is never lifted by limits.',
  });

export const PatchWorkspaceBody = component(
  'PatchWorkspaceBody',
  z.object({
    suspended: z
      .boolean()
      .optional()
      .meta({ description: 'true suspends (suspendedReason operator); false lifts any suspension, unless a limit is still reached.' }),
    limits: LimitsBody.optional(),
    providers: z
      .strictObject({ anthropic: ProviderPatch.nullable().optional(), openai: ProviderPatch.nullable().optional() })
      .optional()
      .meta({
        description:
          'The workspace\'s own model providers for AI steps, over the SERVICE_ANTHROPIC_* / SERVICE_OPENAI_* defaults field by field. ' +
          'Fields are merged (null removes one); a provider set to null removes the workspace\'s entry. Keys are sealed at rest and never shown.',
      }),
    retentionDays: z
      .number()
      .int()
      .min(RETENTION_DAYS_RANGE.min)
      .max(RETENTION_DAYS_RANGE.max)
      .nullable()
      .optional()
      .meta({
        description:
          `Days the workspace keeps its history, ${RETENTION_DAYS_RANGE.min} to ${RETENTION_DAYS_RANGE.max}; null goes back to the default (${DEFAULT_RETENTION_DAYS}). ` +
          'Ended runs with their steps, logs and scores, events, finished deliveries with their attempts, decided approvals and control audit rows older than that are deleted in small batches (docs/retention.md).',
      }),
  }),
);
