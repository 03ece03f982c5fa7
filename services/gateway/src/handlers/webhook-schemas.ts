import { z } from 'zod';
import { component, json, limit, name, str, timestamp } from './schemas.js';

/**
 * Outbound webhooks (SPEC "Webhook delivery", "Webhook endpoint config",
 * "Endpoint delivery stats row"): the schemas the gateway validates the
 * endpoint and delivery routes with, and documents the dispatcher's answers
 * by. The dispatcher owns the semantic checks (a URL it can send to); these
 * catch the shape early with a 400 naming the field.
 */

export const WEBHOOK_EVENT_KINDS = ['run.succeeded', 'run.failed', 'run.cancelled', 'step.failed'] as const;
export const DELIVERY_EVENT_KINDS = [...WEBHOOK_EVENT_KINDS, 'custom'] as const;
export const DELIVERY_STATUSES = ['pending', 'delivering', 'succeeded', 'failed', 'exhausted', 'dead'] as const;
export const ATTEMPT_OUTCOMES = ['succeeded', 'http_error', 'timeout', 'connection_error', 'skipped'] as const;

const SECRET_NOTE =
  'The signing secret: shown only here, never by a read. Deliveries carry `X-Service-Signature: t=<unix seconds>&s=<hex HMAC-SHA256 of "<t>.<raw body>">` under it.';

// ---- components

const endpointFields = {
  id: z.string(),
  name: z.string().optional(),
  app: z.string().optional().meta({ description: 'Only runs of this app are delivered; absent means every app.' }),
  url: z.string().meta({ format: 'uri', description: 'Where deliveries are POSTed.' }),
  scheme: z.string().meta({ description: 'Signature scheme of the deliveries: `hmac-sha256` (X-Service-Signature).' }),
  eventKinds: z.array(z.enum(WEBHOOK_EVENT_KINDS)),
  enabled: z.boolean().meta({ description: 'A disabled endpoint gets no new deliveries.' }),
  createdAt: timestamp(),
  updatedAt: timestamp(),
};

export const WebhookEndpoint = component(
  'WebhookEndpoint',
  z.object(endpointFields),
  'An outbound subscription. The signing secret is never returned by a read.',
);
export const CreatedWebhookEndpoint = component(
  'CreatedWebhookEndpoint',
  z.object({ ...endpointFields, secret: z.string().meta({ description: SECRET_NOTE }) }),
  'The created endpoint with its secret, shown once.',
);
export const UpdatedWebhookEndpoint = component(
  'UpdatedWebhookEndpoint',
  z.object({
    ...endpointFields,
    secret: z
      .string()
      .optional()
      .meta({ description: `Present only when the PATCH rotated it. ${SECRET_NOTE}` }),
  }),
  'The edited endpoint; `secret` only when rotateSecret was true (the old secret stops verifying at once).',
);

export const WebhookEndpointStats = component(
  'WebhookEndpointStats',
  z.object({
    endpointId: z.string().meta({ description: 'Endpoint the row aggregates.' }),
    delivered: z.number().int().meta({ description: 'Deliveries created in the window, in-flight ones included.' }),
    succeeded: z.number().int().meta({ description: 'Deliveries that settled successfully.' }),
    failed: z.number().int().meta({ description: 'Deliveries that failed terminally (exhausted or dead).' }),
    lastDelivery: timestamp('Creation time of the most recent delivery in the window.').optional(),
  }),
);

const deliveryFields = {
  id: z.string().meta({ description: 'Delivery id; also sent as `X-Service-Delivery-Id` so a partner can dedupe.' }),
  app: z.string().meta({ description: 'App whose run produced the delivery.' }),
  endpointId: z.string().optional().meta({ description: 'Subscribed endpoint; absent for a custom send.' }),
  url: z.string().meta({ description: 'Destination POSTed to.' }),
  eventKind: z.enum(DELIVERY_EVENT_KINDS),
  sourceRunId: z.string().optional().meta({ description: 'Run whose lifecycle produced it.' }),
  payload: json(
    'The JSON body sent (see WebhookPayload for the lifecycle kinds; a custom send carries the data given to ctx.webhook.send).',
  ),
  status: z.enum(DELIVERY_STATUSES).meta({
    description:
      'pending (queued), delivering (an attempt in flight), succeeded (a 2xx), failed (awaiting a retry at nextAttemptAt), exhausted (5 attempts spent), dead (a response or URL retrying cannot fix).',
  }),
  attemptCount: z.number().int().meta({ description: 'Attempts made.' }),
  maxAttempts: z.number().int().meta({ description: 'Attempts allowed (5).' }),
  lastStatusCode: z.number().int().optional().meta({ description: "Latest attempt's HTTP status; absent until a partner answered." }),
  nextAttemptAt: timestamp('Next retry while failed.').optional(),
  createdAt: timestamp(),
  updatedAt: timestamp(),
};

export const WebhookDelivery = component('WebhookDelivery', z.object(deliveryFields), 'One outbound delivery, as listed.');
export const WebhookAttempt = component(
  'WebhookAttempt',
  z.object({
    id: z.string(),
    attempt: z.number().int().meta({ description: '1-based attempt number.' }),
    outcome: z.enum(ATTEMPT_OUTCOMES),
    statusCode: z.number().int().optional().meta({ description: 'HTTP status, when the partner responded.' }),
    responseSnippet: z.string().optional().meta({ description: 'Bounded prefix of the response body.' }),
    error: z.string().optional().meta({ description: 'Transport error when there was no response.' }),
    durationMs: z.number().int(),
    createdAt: timestamp(),
  }),
  'One attempt of a delivery; the log is append-only.',
);
export const WebhookDeliveryDetail = component(
  'WebhookDeliveryDetail',
  z.object({ ...deliveryFields, attempts: z.array(WebhookAttempt).meta({ description: 'Every attempt, oldest first.' }) }),
  'One delivery with its attempt log.',
);

/**
 * The body POSTed for each lifecycle kind (services/webhook-dispatcher
 * domain/payload.ts builds it): an envelope with the delivery id and kind,
 * and `data` per kind.
 */
const envelope = {
  id: z.string().meta({ description: 'The delivery id, as in X-Service-Delivery-Id: the same on every attempt, so dedupe on it.' }),
  createdAt: timestamp('When the delivery was queued.'),
};
const runRef = {
  runId: z.string(),
  workflow: z.string(),
  app: z.string(),
  tags: z.array(z.string()).meta({ description: "The run's tags (POST /events `tags`): route a tenant's deliveries by them." }),
};
export const WebhookRunPayload = component(
  'WebhookRunPayload',
  z.object({
    ...envelope,
    kind: z.enum(['run.succeeded', 'run.failed', 'run.cancelled']),
    data: z.object({
      ...runRef,
      status: z.enum(['succeeded', 'failed', 'cancelled']),
      finishedAt: timestamp('When the run reached its terminal status.'),
      result: json('run.succeeded only: what the handler returned (null when nothing).').optional(),
      error: json('run.failed and run.cancelled only: the run error, e.g. { "message": "..." }.').optional(),
    }),
  }),
  'Body of a run.succeeded, run.failed or run.cancelled delivery.',
);
export const WebhookStepFailedPayload = component(
  'WebhookStepFailedPayload',
  z.object({
    ...envelope,
    kind: z.literal('step.failed'),
    data: z.object({
      ...runRef,
      stepId: z.string().meta({ description: 'Hashed step id.' }),
      stepName: z.string(),
      attempts: z.number().int().meta({ description: 'Attempts the step made.' }),
      error: json('The step error, e.g. { "message": "..." }.'),
      failedAt: timestamp(),
    }),
  }),
  'Body of a step.failed delivery: a step that failed for good (its retries spent).',
);
export const WebhookPayload = component(
  'WebhookPayload',
  z.union([WebhookRunPayload, WebhookStepFailedPayload]),
  'What a lifecycle delivery POSTs (JSON, signed with X-Service-Signature, with X-Service-Delivery-Id). A custom delivery (ctx.webhook.send) POSTs the data the step gave, unsigned.',
);

// ---- requests

const url = () =>
  str()
    .min(1)
    .max(2048)
    .meta({
      format: 'uri',
      description: 'http(s) URL deliveries are POSTed to; private addresses are refused unless the operator allows them.',
    });
/** name and app: null or "" clears them on a PATCH. */
const label = (description: string) => str().max(200).nullable().optional().meta({ description });
const eventKinds = () => z.array(z.enum(WEBHOOK_EVENT_KINDS)).min(1).meta({ description: 'One or more lifecycle kinds to deliver.' });

export const CreateWebhookEndpointBody = component(
  'CreateWebhookEndpointBody',
  z.object({
    name: label('Label.'),
    app: label('Restrict to one app; absent means all.'),
    url: url(),
    eventKinds: eventKinds(),
    secret: str()
      .min(16)
      .max(256)
      .optional()
      .meta({
        description: 'Adopt a known signing secret (16-256 characters) instead of a generated one (32 random bytes, `whsec_` + base64url).',
      }),
  }),
  'Unknown fields are refused (400 invalid_webhook_endpoint naming the field).',
);
export const PatchWebhookEndpointBody = component(
  'PatchWebhookEndpointBody',
  z.object({
    name: label('Label; null or "" removes it.'),
    app: label('Restrict to one app; null or "" delivers every app.'),
    url: url().optional(),
    eventKinds: eventKinds().optional(),
    enabled: z.boolean().optional(),
    rotateSecret: z.boolean().optional().meta({ description: 'true issues a new secret, returned once in the response.' }),
  }),
  'Omitted fields are unchanged; unknown fields are refused.',
);

export const ListWebhookDeliveriesQuery = component(
  'ListWebhookDeliveriesQuery',
  z.object({
    status: z.enum(DELIVERY_STATUSES).optional().meta({ description: 'Only deliveries in this status (default all).' }),
    app: name('Restrict to one app.').optional(),
    limit: limit(30, 200),
    cursor: str().min(1).max(2048).optional().meta({ description: 'X-Next-Cursor of the previous page.' }),
  }),
);
export const WebhookStatsQuery = component(
  'WebhookStatsQuery',
  z.object({
    since: z.iso.datetime({ offset: true }).optional().meta({ description: 'RFC 3339; the window starts here (default: 30 days ago).' }),
  }),
);
