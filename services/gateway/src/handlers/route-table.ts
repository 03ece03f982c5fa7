import type { z } from 'zod';
import * as s from './schemas.js';
import * as wh from './webhook-schemas.js';
import * as rcv from './receiver-schemas.js';

/** Who may call a route: any key (reads), a secret or console key (writes), the admin token, or anyone (the document). */
export type Access = 'open' | 'read' | 'write' | 'admin';

/** What serves a route: a service op over the bus, or a handler in the gateway itself. */
export type Target =
  | { kind: 'forward'; service: string; op: string }
  | { kind: 'local'; name: LocalHandler };

export type LocalHandler =
  | 'openapi'
  | 'runStream'
  | 'runWait'
  | 'runsStream'
  | 'eventsStream'
  | 'connectInfo'
  | 'mcp'
  | 'mcpNoStream'
  | 'webhookReceive'
  | 'admin.createWorkspace'
  | 'admin.getWorkspace'
  | 'admin.patchWorkspace'
  | 'admin.createKey'
  | 'admin.revokeKey';

export interface RouteSpec {
  method: 'get' | 'post' | 'patch' | 'delete';
  /** Express path under /v1. Literal segments first: /runs/stream is declared before /runs/:id. */
  path: string;
  summary: string;
  tag: string;
  access: Access;
  params?: z.ZodObject;
  query?: z.ZodObject;
  body?: { schema: z.ZodType; required: boolean; /** Error code of a body that fails the schema. @default invalid_body */ errorCode?: string };
  ok: {
    status: number;
    /** A registered component; `array` wraps it in an array. */
    schema?: z.ZodType;
    array?: boolean;
    /** text/event-stream, each frame's data shaped like this component. */
    sse?: z.ZodType;
    headers?: Record<string, string>;
  };
  /** Error statuses worth documenting beyond 400/401/404/413/5xx. */
  errors?: number[];
  /** SPEC Errors: a suspended workspace is refused run-creating calls with 403. */
  startsRuns?: boolean;
  /**
   * Names one run by `:id` (a read, or a control action on it): a run announced moments ago (its
   * StartRun on the way) is waited for briefly, not 404, so a run id from a 202 can be cancelled at once.
   */
  namesRun?: boolean;
  /**
   * Takes an `Idempotency-Key` header, passed on to its service, so that a repeat of the call (a
   * client retrying after a lost answer) starts nothing more: what the key does here, for the document.
   */
  idempotencyKey?: string;
  /** Its 202 names the runs it started (`triggered[].runId`): the gateway follows them for the run streams that usually come next. */
  announcesRuns?: boolean;
  /** Forwarded in batches (ApiBatcher): the calls that arrive together go to the service in one bus request, each answered as alone. */
  batched?: boolean;
  target: Target;
}

const fwd = (service: string, op: string): Target => ({ kind: 'forward', service, op });
const local = (name: LocalHandler): Target => ({ kind: 'local', name });
const NEXT_CURSOR = { 'X-Next-Cursor': 'Opaque cursor of the next page; absent on the last page.' };
const FORK_KEY =
  'A repeat of the call with the same key within 24 h answers with the run the first created (status and body as the first, header `Idempotent-Replayed: true`) ' +
  'instead of starting another; the key sent with another call (another run, action or body) is 422 `idempotency_key_reused`.';
const REPLAYED = { 'Idempotent-Replayed': '`true` when the Idempotency-Key was seen: the run is the one the first call made.' };
const BULK_KEY =
  'The call is made once per key within 24 h: sent again (a retry after a lost answer, or while the first is at work) it considers only runs created before the first call ' +
  'began and replays none that a call with the key replayed (counted in `replayed`, header `Idempotent-Replayed: true`); the key sent with another filter is 422 `idempotency_key_reused`.';

/**
 * Every public route, its schemas and its owner. The router mounts exactly
 * this list and the OpenAPI document is generated from it; a test compares
 * the two. The gateway holds no run, event or runner data.
 */
export const ROUTES: RouteSpec[] = [
  { method: 'get', path: '/openapi.json', summary: 'This OpenAPI 3.1 document', tag: 'meta', access: 'open', ok: { status: 200 }, target: local('openapi') },

  // Runs (read). Literal paths before /runs/:id.
  { method: 'get', path: '/runs', summary: 'Page of runs, newest first by default (keyset paging)', tag: 'runs', access: 'read', query: s.ListRunsQuery, ok: { status: 200, schema: s.Run, array: true, headers: NEXT_CURSOR }, target: fwd('scheduler', 'runs.list') },
  { method: 'get', path: '/runs/stats', summary: 'Run counts and success rate', tag: 'runs', access: 'read', query: s.StatsQuery, ok: { status: 200, schema: s.RunStats }, target: fwd('scheduler', 'runs.stats') },
  { method: 'get', path: '/runs/stream', summary: 'SSE: run_status frames of every run in the workspace (best-effort)', tag: 'runs', access: 'read', ok: { status: 200, sse: s.RunStatusFrame }, target: local('runsStream') },
  { method: 'post', path: '/runs/bulk-replay', summary: 'Replay finished runs matching a filter, newest first, up to a per-call ceiling', tag: 'control', access: 'write', startsRuns: true, idempotencyKey: BULK_KEY, body: { schema: s.BulkReplayBody, required: true }, ok: { status: 200, schema: s.BulkReplayResult, headers: { 'Idempotent-Replayed': '`true` when the Idempotency-Key was seen.' } }, errors: [403, 422], target: fwd('scheduler', 'runs.bulkReplay') },
  { method: 'post', path: '/runs/bulk-cancel', summary: 'Cancel the runs that have not ended matching a filter (and a CEL `if`), newest first, up to a per-call ceiling', tag: 'control', access: 'write', body: { schema: s.BulkCancelBody, required: true }, ok: { status: 200, schema: s.BulkCancelResult }, target: fwd('scheduler', 'runs.bulkCancel') },
  { method: 'get', path: '/runs/:id', summary: 'One run, with input and result', tag: 'runs', access: 'read', namesRun: true, params: s.IdParams, ok: { status: 200, schema: s.RunDetail }, target: fwd('scheduler', 'runs.get') },
  { method: 'get', path: '/runs/:id/steps', summary: "The run's steps, in order (unpaged)", tag: 'runs', access: 'read', namesRun: true, params: s.IdParams, ok: { status: 200, schema: s.Step, array: true }, target: fwd('scheduler', 'runs.steps') },
  { method: 'get', path: '/runs/:id/scores', summary: "The scores the run's Score steps wrote (unpaged)", tag: 'runs', access: 'read', namesRun: true, params: s.IdParams, ok: { status: 200, schema: s.Score, array: true }, target: fwd('scheduler', 'runs.scores') },
  { method: 'get', path: '/runs/:id/logs', summary: 'Run log lines, oldest first', tag: 'runs', access: 'read', namesRun: true, params: s.IdParams, query: s.LogsQuery, ok: { status: 200, schema: s.LogLine, array: true }, target: fwd('scheduler', 'runs.logs') },
  { method: 'get', path: '/runs/:id/wait', summary: 'The run once it has ended (succeeded, failed or cancelled), or as it is after `timeoutMs`: check `status`', tag: 'runs', access: 'read', params: s.IdParams, query: s.RunWaitQuery, ok: { status: 200, schema: s.RunDetail }, target: local('runWait') },
  { method: 'get', path: '/runs/:id/stream', summary: 'SSE: the run timeline, replayed after `from` (or Last-Event-ID), then live; ends when the run is terminal', tag: 'runs', access: 'read', params: s.IdParams, query: s.StreamQuery, ok: { status: 200, sse: s.TimelineFrame }, target: local('runStream') },

  // Run control, forwarded to the scheduler with the actor.
  { method: 'post', path: '/runs/:id/cancel', summary: 'Cancel a run', tag: 'control', access: 'write', namesRun: true, params: s.IdParams, ok: { status: 200, schema: s.RunDetail }, errors: [409], target: fwd('scheduler', 'runs.cancel') },
  { method: 'post', path: '/runs/:id/pause', summary: 'Pause a run at the next step boundary', tag: 'control', access: 'write', namesRun: true, params: s.IdParams, ok: { status: 200, schema: s.RunDetail }, errors: [409], target: fwd('scheduler', 'runs.pause') },
  { method: 'post', path: '/runs/:id/resume', summary: 'Resume a paused run', tag: 'control', access: 'write', namesRun: true, params: s.IdParams, ok: { status: 200, schema: s.RunDetail }, errors: [409], target: fwd('scheduler', 'runs.resume') },
  { method: 'post', path: '/runs/:id/replay', summary: 'Replay a finished run as a new run', tag: 'control', access: 'write', namesRun: true, startsRuns: true, idempotencyKey: FORK_KEY, params: s.IdParams, body: { schema: s.ReplayBody, required: false }, ok: { status: 201, schema: s.NewRun, headers: REPLAYED }, errors: [403, 409, 422], target: fwd('scheduler', 'runs.replay') },
  { method: 'post', path: '/runs/:id/retry-from-step', summary: 'Fork a finished run, resuming at a step', tag: 'control', access: 'write', namesRun: true, startsRuns: true, idempotencyKey: FORK_KEY, params: s.IdParams, body: { schema: s.RetryFromStepBody, required: true }, ok: { status: 201, schema: s.NewRun, headers: REPLAYED }, errors: [403, 409, 422], target: fwd('scheduler', 'runs.retryFromStep') },
  { method: 'get', path: '/control-actions', summary: 'Control audit entries, newest first', tag: 'control', access: 'read', query: s.ControlActionsQuery, ok: { status: 200, schema: s.ControlAction, array: true }, target: fwd('scheduler', 'control.list') },

  // Events (ingest). /events/stream before /events/:id.
  { method: 'post', path: '/events', summary: 'Ingest one event or a batch of up to 100', tag: 'events', access: 'write', body: { schema: s.EventBody, required: true, errorCode: 'invalid_event' }, ok: { status: 202, schema: s.IngestResult }, announcesRuns: true, batched: true, idempotencyKey: "The event's dedupeId (a batch's i-th event's `<key>:<i>`): the POST sent again within 24 h is dropped as a repeat (`deduped: true`). An event with a dedupeId of its own beside it is a 400.", target: fwd('ingest', 'events.ingest') },
  { method: 'get', path: '/usage', summary: "The workspace's model usage since a time, in total and per model", tag: 'runs', access: 'read', query: s.UsageQuery, ok: { status: 200, schema: s.UsageReport }, target: fwd('scheduler', 'usage.get') },
  { method: 'get', path: '/sessions', summary: 'Sessions, most recently active first, with run counts, usage and scores', tag: 'events', access: 'read', query: s.SessionsQuery, ok: { status: 200, schema: s.Session, array: true }, target: fwd('scheduler', 'sessions.list') },
  { method: 'get', path: '/events', summary: 'Event log, newest first', tag: 'events', access: 'read', query: s.EventLogQuery, ok: { status: 200, schema: s.EventRecord, array: true }, target: fwd('ingest', 'events.list') },
  { method: 'get', path: '/events/stream', summary: 'SSE: live tail of ingested events (best-effort)', tag: 'events', access: 'read', ok: { status: 200, sse: s.EventRecord }, target: local('eventsStream') },
  { method: 'get', path: '/events/held', summary: 'Events that workflows paused with hold keep, oldest first: what their resume will admit', tag: 'events', access: 'read', query: s.HeldEventsQuery, ok: { status: 200, schema: s.HeldEvent, array: true }, target: fwd('ingest', 'events.held') },
  { method: 'get', path: '/events/scheduled', summary: 'Events posted with a delay and not yet taken in, soonest first', tag: 'events', access: 'read', query: s.ListEventsQuery, ok: { status: 200, schema: s.EventRecord, array: true }, target: fwd('ingest', 'events.scheduled') },
  { method: 'get', path: '/events/:id', summary: 'One event record (an event posted with a delay and not yet taken in has `scheduledFor`)', tag: 'events', access: 'read', params: s.IdParams, ok: { status: 200, schema: s.EventRecord }, target: fwd('ingest', 'events.get') },
  { method: 'post', path: '/events/:id/cancel', summary: 'Cancel an event posted with a delay, before it is taken in (409 once it is)', tag: 'events', access: 'write', params: s.IdParams, ok: { status: 200, schema: s.CancelledEvent }, errors: [409], target: fwd('ingest', 'events.cancel') },

  // Approvals (approvals service). A decision needs a secret or console key; the decider is the caller, never the body.
  { method: 'get', path: '/approvals', summary: 'Approvals, newest first', tag: 'approvals', access: 'read', query: s.ListApprovalsQuery, ok: { status: 200, schema: s.Approval, array: true }, target: fwd('approvals', 'approvals.list') },
  { method: 'get', path: '/approvals/:id', summary: 'One approval, with its proposed tool call and context', tag: 'approvals', access: 'read', params: s.IdParams, ok: { status: 200, schema: s.Approval }, target: fwd('approvals', 'approvals.get') },
  {
    method: 'post',
    path: '/approvals/:id/decision',
    summary:
      'Decide an open approval; the parked run resumes. decidedBy is the X-Service-Actor of a console key, else the key name; decidedVia is console, api, or unrecorded with authentication off. 409 once the approval is not open.',
    tag: 'approvals',
    access: 'write',
    params: s.IdParams,
    body: { schema: s.DecisionBody, required: true, errorCode: 'invalid_decision' },
    ok: { status: 200, schema: s.Approval },
    errors: [403, 409],
    target: fwd('approvals', 'approvals.decide'),
  },

  // Outbound webhooks (webhook-dispatcher). Config writes and redeliver need a secret or console key; /stats before /:id.
  { method: 'get', path: '/webhook-endpoints', summary: 'Outbound endpoint configs (never their secrets)', tag: 'webhooks', access: 'read', ok: { status: 200, schema: wh.WebhookEndpoint, array: true }, target: fwd('webhook-dispatcher', 'endpoints.list') },
  { method: 'get', path: '/webhook-endpoints/stats', summary: 'Per-endpoint delivery counts since `since` (default the last 30 days)', tag: 'webhooks', access: 'read', query: wh.WebhookStatsQuery, ok: { status: 200, schema: wh.WebhookEndpointStats, array: true }, target: fwd('webhook-dispatcher', 'endpoints.stats') },
  { method: 'post', path: '/webhook-endpoints', summary: 'Subscribe an endpoint to run lifecycle kinds; the signing secret is returned once', tag: 'webhooks', access: 'write', body: { schema: wh.CreateWebhookEndpointBody, required: true, errorCode: 'invalid_webhook_endpoint' }, ok: { status: 201, schema: wh.CreatedWebhookEndpoint }, errors: [403], target: fwd('webhook-dispatcher', 'endpoints.create') },
  { method: 'patch', path: '/webhook-endpoints/:id', summary: 'Edit an endpoint; rotateSecret returns the new secret once', tag: 'webhooks', access: 'write', params: s.IdParams, body: { schema: wh.PatchWebhookEndpointBody, required: true, errorCode: 'invalid_webhook_endpoint' }, ok: { status: 200, schema: wh.UpdatedWebhookEndpoint }, errors: [403], target: fwd('webhook-dispatcher', 'endpoints.update') },
  { method: 'delete', path: '/webhook-endpoints/:id', summary: 'Delete an endpoint (its past deliveries stay readable)', tag: 'webhooks', access: 'write', params: s.IdParams, ok: { status: 204 }, errors: [403], target: fwd('webhook-dispatcher', 'endpoints.delete') },
  { method: 'get', path: '/webhook-deliveries', summary: 'Page of outbound deliveries, newest first (keyset over createdAt, id)', tag: 'webhooks', access: 'read', query: wh.ListWebhookDeliveriesQuery, ok: { status: 200, schema: wh.WebhookDelivery, array: true, headers: NEXT_CURSOR }, target: fwd('webhook-dispatcher', 'deliveries.list') },
  { method: 'get', path: '/webhook-deliveries/:id', summary: 'One delivery with its attempt log', tag: 'webhooks', access: 'read', params: s.IdParams, ok: { status: 200, schema: wh.WebhookDeliveryDetail }, target: fwd('webhook-dispatcher', 'deliveries.get') },
  { method: 'post', path: '/webhook-deliveries/:id/redeliver', summary: 'Re-queue a delivery with a fresh retry budget (attempt log kept); 409 while delivering', tag: 'webhooks', access: 'write', params: s.IdParams, ok: { status: 204 }, errors: [403, 409], target: fwd('webhook-dispatcher', 'deliveries.redeliver') },

  // Inbound webhooks (ingest owns receivers and what arrived). POST /webhooks/:slug takes no API key: the signature is the credential.
  { method: 'get', path: '/webhook-receivers', summary: 'Inbound receiver configs (never their secrets)', tag: 'webhooks', access: 'read', ok: { status: 200, schema: rcv.WebhookReceiver, array: true }, target: fwd('ingest', 'receivers.list') },
  { method: 'post', path: '/webhook-receivers', summary: 'Create a receiver; the signing secret is returned once; a slug in use is 409', tag: 'webhooks', access: 'write', body: { schema: rcv.CreateWebhookReceiverBody, required: true, errorCode: 'invalid_webhook_receiver' }, ok: { status: 201, schema: rcv.CreatedWebhookReceiver }, errors: [403, 409], target: fwd('ingest', 'receivers.create') },
  { method: 'patch', path: '/webhook-receivers/:id', summary: 'Edit a receiver; rotateSecret returns the new secret once; the slug is immutable', tag: 'webhooks', access: 'write', params: s.IdParams, body: { schema: rcv.PatchWebhookReceiverBody, required: true, errorCode: 'invalid_webhook_receiver' }, ok: { status: 200, schema: rcv.UpdatedWebhookReceiver }, errors: [403], target: fwd('ingest', 'receivers.update') },
  { method: 'delete', path: '/webhook-receivers/:id', summary: 'Delete a receiver (its source deliveries stay readable)', tag: 'webhooks', access: 'write', params: s.IdParams, ok: { status: 204 }, errors: [403], target: fwd('ingest', 'receivers.delete') },
  { method: 'get', path: '/webhook-source-deliveries', summary: 'Page of inbound posts, newest first (keyset over createdAt, id), with the verification outcome and the event each became', tag: 'webhooks', access: 'read', query: rcv.ListSourceDeliveriesQuery, ok: { status: 200, schema: rcv.WebhookSourceDelivery, array: true, headers: NEXT_CURSOR }, target: fwd('ingest', 'sourceDeliveries.list') },
  {
    method: 'post',
    path: '/webhooks/:slug',
    summary:
      'Inbound delivery, no API key: signed with X-Service-Signature (t=<unix>&s=<hex HMAC-SHA256 of "<t>.<raw body>">, 5 minutes of skew), Stripe-Signature or X-Hub-Signature-256 under the receiver secret. A verified JSON body becomes the event named by the receiver eventName (202). Refused and recorded: bad or missing signature 401 invalid_signature, disabled receiver 403, over 1 MiB 413, non-JSON 400; an unknown slug is 404.',
    tag: 'webhooks',
    access: 'open',
    params: rcv.SlugParams,
    body: { schema: rcv.InboundWebhookBody, required: false },
    ok: { status: 202, schema: rcv.InboundAccepted },
    errors: [401, 403],
    target: local('webhookReceive'),
  },

  // MCP (Model Context Protocol), stateless streamable HTTP: the same keys and tools over the routes above.
  {
    method: 'post',
    path: '/mcp',
    summary:
      'MCP server (JSON-RPC over streamable HTTP, stateless, JSON answers). Read tools work with any key; write tools need a secret or console key, and their calls carry decidedVia mcp.',
    tag: 'mcp',
    access: 'read',
    body: { schema: s.McpMessage, required: true, errorCode: 'invalid_mcp_message' },
    ok: { status: 200 },
    target: local('mcp'),
  },
  { method: 'get', path: '/mcp', summary: 'No server-initiated stream: the MCP server is stateless (405)', tag: 'mcp', access: 'read', ok: { status: 405 }, errors: [405], target: local('mcpNoStream') },

  // Runners and workflows (invoker).
  { method: 'post', path: '/runs/:id/checkpoint', summary: 'A runner stores steps it finished mid-pass (checkpoint); 409 ends the pass', tag: 'runners', access: 'write', params: s.IdParams, body: { schema: s.CheckpointBody, required: true, errorCode: 'invalid_checkpoint' }, ok: { status: 200, schema: s.CheckpointStored }, errors: [409], target: fwd('scheduler', 'runs.checkpoint') },
  { method: 'post', path: '/register', summary: 'A runner announces itself and its workflows', tag: 'runners', access: 'write', body: { schema: s.RegisterBody, required: true, errorCode: 'invalid_registration' }, ok: { status: 200 }, target: fwd('invoker', 'register') },
  { method: 'get', path: '/runners', summary: 'Registered runners', tag: 'runners', access: 'read', query: s.AppQuery, ok: { status: 200, schema: s.Runner, array: true }, target: fwd('invoker', 'runners.list') },
  { method: 'get', path: '/connect', summary: 'WebSocket upgrade for the Connect transport (subprotocol service.connect.v0); a plain GET answers 426, a malformed handshake 400/405/426 with the error body', tag: 'runners', access: 'write', ok: { status: 101 }, errors: [405, 426], target: local('connectInfo') },
  { method: 'get', path: '/workflows', summary: 'Registered workflow definitions', tag: 'runners', access: 'read', query: s.AppQuery, ok: { status: 200, schema: s.Workflow, array: true }, target: fwd('invoker', 'workflows.list') },
  { method: 'post', path: '/schedules', summary: 'Make a schedule: a cron pattern that starts runs of a registered workflow with its data (an externalId already given for the workflow replaces that schedule: 200)', tag: 'runners', access: 'write', body: { schema: s.ScheduleBody, required: true, errorCode: 'invalid_schedule' }, ok: { status: 201, schema: s.Schedule }, errors: [403], target: fwd('ingest', 'schedules.create') },
  { method: 'get', path: '/schedules', summary: 'Schedules made through the API, newest first', tag: 'runners', access: 'read', query: s.SchedulesQuery, ok: { status: 200, schema: s.Schedule, array: true }, target: fwd('ingest', 'schedules.list') },
  { method: 'get', path: '/schedules/:id', summary: 'One schedule, with its next and last tick', tag: 'runners', access: 'read', params: s.IdParams, ok: { status: 200, schema: s.Schedule }, target: fwd('ingest', 'schedules.get') },
  { method: 'post', path: '/schedules/:id/pause', summary: 'Pause a schedule: its ticks start no run until it is resumed', tag: 'runners', access: 'write', params: s.IdParams, ok: { status: 200, schema: s.Schedule }, errors: [403], target: fwd('ingest', 'schedules.pause') },
  { method: 'post', path: '/schedules/:id/resume', summary: 'Resume a paused schedule from its next tick after now (the ticks it missed do not fire)', tag: 'runners', access: 'write', params: s.IdParams, ok: { status: 200, schema: s.Schedule }, errors: [403], target: fwd('ingest', 'schedules.resume') },
  { method: 'delete', path: '/schedules/:id', summary: 'Delete a schedule: no later tick starts a run (runs it started go on)', tag: 'runners', access: 'write', params: s.IdParams, ok: { status: 204 }, errors: [403], target: fwd('ingest', 'schedules.delete') },
  { method: 'post', path: '/workflows/pause', summary: 'Pause a workflow: its events and cron ticks start no run until resumed (runs under way go on)', tag: 'runners', access: 'write', body: { schema: s.PauseWorkflowBody, required: true }, ok: { status: 200, schema: s.Workflow }, target: fwd('invoker', 'workflows.pause') },
  { method: 'post', path: '/workflows/resume', summary: 'Resume a paused workflow: its events start runs again', tag: 'runners', access: 'write', body: { schema: s.WorkflowRef, required: true }, ok: { status: 200, schema: s.Workflow }, target: fwd('invoker', 'workflows.resume') },

  // Admin API (CONTRACT.md), bearer SERVICE_ADMIN_TOKEN.
  { method: 'post', path: '/admin/workspaces', summary: 'Create a workspace with its keys', tag: 'admin', access: 'admin', body: { schema: s.CreateWorkspaceBody, required: true }, ok: { status: 201, schema: s.CreatedWorkspace }, target: local('admin.createWorkspace') },
  { method: 'get', path: '/admin/workspaces/:id', summary: 'One workspace', tag: 'admin', access: 'admin', params: s.IdParams, ok: { status: 200, schema: s.Workspace }, target: local('admin.getWorkspace') },
  { method: 'patch', path: '/admin/workspaces/:id', summary: 'Suspend, unsuspend or change limits', tag: 'admin', access: 'admin', params: s.IdParams, body: { schema: s.PatchWorkspaceBody, required: true }, ok: { status: 200, schema: s.Workspace }, target: local('admin.patchWorkspace') },
  { method: 'post', path: '/admin/workspaces/:id/keys', summary: 'Issue an API key', tag: 'admin', access: 'admin', params: s.IdParams, body: { schema: s.CreateKeyBody, required: true }, ok: { status: 201, schema: s.CreatedKey }, target: local('admin.createKey') },
  { method: 'delete', path: '/admin/workspaces/:id/keys/:keyId', summary: 'Revoke an API key', tag: 'admin', access: 'admin', params: s.KeyParams, ok: { status: 204 }, target: local('admin.revokeKey') },
];
