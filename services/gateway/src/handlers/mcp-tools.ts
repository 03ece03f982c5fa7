import { z } from 'zod';
import type { RouteInput } from './forward.js';
import { APPROVAL_STATUSES, RUN_STATUSES } from './schemas.js';

/**
 * Calls one route of the table (method and path exactly as written there)
 * on behalf of the MCP caller and answers its parsed JSON body.
 */
export type CallRoute = (method: 'get' | 'post', path: string, input?: Partial<RouteInput> & { json?: unknown }) => Promise<unknown>;

export interface McpTool {
  name: string;
  title: string;
  description: string;
  /** A write tool needs a secret or console key, like the route it calls. */
  write: boolean;
  input: z.ZodRawShape;
  run(args: Record<string, unknown>, call: CallRoute): Promise<unknown>;
}

// Inputs are described for an agent here; the rules that accept or refuse a
// value are the route's own schemas, applied when the tool calls the route.
const runId = z.string().min(1).describe('Run id (run_...).');
const approvalId = z.string().min(1).describe('Approval id (apr_...).');
const app = z.string().min(1).optional().describe('Restrict to one app.');
const limit = (max: number, def: number) => z.number().int().min(1).optional().describe(`How many, 1-${max} (default ${def}).`);

/** Only the fields the caller gave: an absent filter is not sent as undefined. */
const defined = (o: Record<string, unknown>): Record<string, unknown> =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));

const control = (verb: 'cancel' | 'pause' | 'resume', what: string): McpTool => ({
  name: `${verb}_run`,
  title: `${verb[0]!.toUpperCase()}${verb.slice(1)} a run`,
  description: what,
  write: true,
  input: { runId },
  run: (a, call) => call('post', `/runs/:id/${verb}`, { params: { id: a.runId as string } }),
});

/** The tools of the MCP server, each over one or more REST routes. */
export const MCP_TOOLS: McpTool[] = [
  {
    name: 'list_runs',
    title: 'List runs',
    description: 'Runs of the workspace, newest first. A run with needsAttention true is parked on an approval (see list_approvals).',
    write: false,
    input: {
      status: z.enum(RUN_STATUSES).optional().describe('Only runs in this status (running also matches waiting).'),
      app,
      workflow: z.string().min(1).max(256).optional().describe("Only this workflow's runs (its exact name)."),
      q: z.string().min(1).optional().describe('Case-insensitive substring of the workflow name, run id or app.'),
      tags: z.array(z.string().min(1).max(128)).min(1).max(10).optional().describe('Only runs carrying every one of these tags (tenant:acme).'),
      limit: limit(200, 30),
    },
    run: (a, call) => call('get', '/runs', { query: defined({ status: a.status, app: a.app, workflow: a.workflow, tag: a.tags, q: a.q, limit: a.limit }) }),
  },
  {
    name: 'get_run',
    title: 'Get a run',
    description: 'One run with its input and result, its steps in order, and its log lines (oldest first).',
    write: false,
    input: { runId, logLimit: limit(1000, 100) },
    run: async (a, call) => {
      const params = { id: a.runId as string };
      const run = await call('get', '/runs/:id', { params });
      const steps = await call('get', '/runs/:id/steps', { params });
      const logs = await call('get', '/runs/:id/logs', { params, query: defined({ limit: a.logLimit }) });
      return { run, steps, logs };
    },
  },
  {
    name: 'wait_for_run',
    title: 'Wait for a run to end',
    description:
      'The run once it has ended (succeeded, failed or cancelled), with its result or error. Held until then for timeoutMs; ' +
      'after it, the run as it is then: check status, and call again to keep waiting.',
    write: false,
    input: { runId, timeoutMs: z.number().int().min(0).optional().describe('How long to wait, in ms (default 30000, at most 60000).') },
    run: (a, call) => call('get', '/runs/:id/wait', { params: { id: a.runId as string }, query: defined({ timeoutMs: a.timeoutMs }) }),
  },
  {
    name: 'list_approvals',
    title: 'List approvals',
    description: 'Approvals, newest first: pending and escalated ones await a decision (decide_approval).',
    write: false,
    input: {
      status: z.enum(APPROVAL_STATUSES).optional().describe('Only approvals in this status.'),
      runId: runId.optional(),
      limit: limit(1000, 100),
    },
    run: (a, call) => call('get', '/approvals', { query: defined({ status: a.status, runId: a.runId, limit: a.limit }) }),
  },
  {
    name: 'get_approval',
    title: 'Get an approval',
    description: 'One approval: the proposed tool call, its args, risk, context, allowed decisions and status.',
    write: false,
    input: { approvalId },
    run: (a, call) => call('get', '/approvals/:id', { params: { id: a.approvalId as string } }),
  },
  {
    name: 'list_events',
    title: 'List events',
    description: 'The event log, newest first.',
    write: false,
    input: { app, name: z.string().min(1).optional().describe('Only events of this name.'), limit: limit(1000, 100) },
    run: (a, call) => call('get', '/events', { query: defined({ app: a.app, name: a.name, limit: a.limit }) }),
  },
  {
    name: 'list_runners',
    title: 'List runners',
    description: 'Registered runners, with liveness and whether their signing key matches.',
    write: false,
    input: { app },
    run: (a, call) => call('get', '/runners', { query: defined({ app: a.app }) }),
  },
  {
    name: 'list_workflows',
    title: 'List workflows',
    description: 'Registered workflow definitions, with their retry policy and schedules.',
    write: false,
    input: { app },
    run: (a, call) => call('get', '/workflows', { query: defined({ app: a.app }) }),
  },
  {
    name: 'decide_approval',
    title: 'Decide an approval',
    description:
      'Approve or deny an open approval; the parked run resumes. With approved, `args` replaces the proposed args (needs allow to include edit); ' +
      '`response` sends a free-text answer (needs respond). Recorded with decidedVia mcp and the key as decider.',
    write: true,
    input: {
      approvalId,
      status: z.enum(['approved', 'denied']).describe('The decision.'),
      args: z.unknown().optional().describe('Edited tool arguments (approve only).'),
      response: z.string().optional().describe('Free-text answer to the workflow.'),
    },
    run: (a, call) =>
      call('post', '/approvals/:id/decision', {
        params: { id: a.approvalId as string },
        json: defined({ status: a.status, args: a.args, response: a.response }),
      }),
  },
  control('cancel', 'Cancel a run that has not finished.'),
  control('pause', 'Pause a run at its next step boundary.'),
  control('resume', 'Resume a paused run.'),
  ...(['pause', 'resume'] as const).map(
    (verb): McpTool => ({
      name: `${verb}_workflow`,
      title: `${verb === 'pause' ? 'Pause' : 'Resume'} a workflow`,
      description:
        verb === 'pause'
          ? 'Stop a workflow\'s events and cron ticks from starting runs until it is resumed; its runs under way go on. With hold, its events\' runs start once it is resumed.'
          : 'Let a paused workflow\'s events start runs again, and start the runs of the events it held.',
      write: true,
      input: {
        app: z.string().min(1).describe('The app the workflow is registered under.'),
        workflow: z.string().min(1).describe('The workflow name.'),
        ...(verb === 'pause' ? { hold: z.boolean().optional().describe('Keep its events and start their runs once it is resumed (else they start none).') } : {}),
      },
      run: (a, call) => call('post', `/workflows/${verb}`, { json: defined({ app: a.app, workflow: a.workflow, hold: a.hold }) }),
    }),
  ),
  {
    name: 'bulk_cancel_runs',
    title: 'Cancel runs by filter',
    description:
      'Cancel the runs that have not ended matching every field given (at least one), newest first, at most 1,000 a call (capped true: call again). ' +
      "Narrow with `if`, CEL over each run's event (event.data.tenant == 'acme'). Answers how many matched and were cancelled.",
    write: true,
    input: {
      app,
      workflow: z.string().min(1).max(256).optional().describe("Only this workflow's runs (its exact name)."),
      status: z.enum(['queued', 'running', 'waiting', 'paused']).optional().describe('Only runs in this status (running also matches waiting).'),
      tags: z.array(z.string().min(1).max(128)).min(1).max(10).optional().describe('Only runs carrying every one of these tags (tenant:acme).'),
      if: z.string().min(1).optional().describe("CEL over the run's triggering event; only the runs it holds for are cancelled."),
    },
    run: (a, call) => call('post', '/runs/bulk-cancel', { json: defined({ app: a.app, workflow: a.workflow, status: a.status, tags: a.tags, if: a.if }) }),
  },
  {
    name: 'replay_run',
    title: 'Replay a run',
    description: 'Start a finished run again as a new run, with its payload or a replacement `input`.',
    write: true,
    input: {
      runId,
      input: z.unknown().optional().describe('Replaces the payload; absent replays verbatim.'),
      idempotencyKey: z
        .string()
        .optional()
        .describe('Sent again with a retried call, answers with the run the first call made instead of starting another (kept 24 h).'),
    },
    run: (a, call) =>
      call('post', '/runs/:id/replay', {
        params: { id: a.runId as string },
        json: a.input === undefined ? undefined : { input: a.input },
        idempotencyKey: a.idempotencyKey as string | undefined,
      }),
  },
  {
    name: 'send_event',
    title: 'Send an event',
    description: 'Ingest one event: it starts the workflows it triggers and wakes the runs waiting for it.',
    write: true,
    input: {
      name: z.string().min(1).describe('Event name.'),
      data: z.unknown().optional().describe('Payload (any JSON).'),
      app: z.string().min(1).optional().describe('App of the event.'),
      dedupeId: z.string().min(1).optional().describe('Idempotency key: a repeat is not ingested twice.'),
      tags: z.array(z.string().min(1).max(128)).max(10).optional().describe('Tags of the runs it starts (tenant:acme, user:42).'),
      session: z.string().min(1).max(256).optional().describe('Session the runs it starts join (a conversation, a user journey): GET /v1/sessions sums their model usage and scores.'),
      delay: z
        .union([z.number().int().min(0), z.string().min(1)])
        .optional()
        .describe('Take the event in later: ms, text like "30s" or "2h", or an RFC 3339 timestamp (at most a year ahead).'),
    },
    run: (a, call) => call('post', '/events', { json: defined({ name: a.name, data: a.data, app: a.app, dedupeId: a.dedupeId, tags: a.tags, session: a.session, delay: a.delay }) }),
  },
];
