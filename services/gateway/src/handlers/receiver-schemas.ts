import { z } from 'zod';
import { component, json, limit, name, str, timestamp } from './schemas.js';

/**
 * Inbound webhooks (SPEC "Webhook receiver config", Events 6): the schemas
 * of the receiver routes, the source-delivery read and POST /webhooks/{slug}.
 * Ingest owns the semantic checks (slug taken, secret length); these catch
 * the shape early with a 400 naming the field.
 */

const SECRET_NOTE =
  'The signing secret: shown only here, never by a read. A partner signs each post with `X-Service-Signature: t=<unix seconds>&s=<hex HMAC-SHA256 of "<t>.<raw body>">` under it (Stripe-Signature and X-Hub-Signature-256 are accepted too).';

const CEL_NOTE = 'CEL over `body` (the posted JSON) and `headers` (its headers of interest, lowercase names).';
const TransformFields = z
  .object({
    if: str()
      .max(1024)
      .optional()
      .meta({ description: `Whether a verified post becomes an event; false (or failing) records it as \`filtered\` and answers 202 with no event. ${CEL_NOTE}` }),
    name: str()
      .max(1024)
      .optional()
      .meta({ description: `The event's name instead of \`eventName\`, e.g. \`'github/' + headers['x-github-event']\`. ${CEL_NOTE}` }),
    data: str().max(1024).optional().meta({ description: `The event's data instead of the whole body, e.g. \`body.data.object\`. ${CEL_NOTE}` }),
    id: str()
      .max(1024)
      .optional()
      .meta({ description: `The event's dedupeId instead of the delivery-id header, e.g. \`body.id\`: a partner's retry starts nothing twice. ${CEL_NOTE}` }),
  })
  .strict()
  .meta({
    description:
      'CEL that filters verified posts and makes their events. An expression that does not compile is a 400 here; one that fails on a post (`name`, `data`, `id`) answers the partner 422 `transform_failed`, recorded.',
  });

const receiverFields = {
  id: z.string(),
  name: z.string().optional(),
  app: z.string().optional().meta({ description: 'App the produced event belongs to.' }),
  targetApp: z.string().optional().meta({ description: 'Target app for the produced event (routes it over `app`).' }),
  slug: z.string().meta({ description: 'Public URL segment: partners POST to /v1/webhooks/{slug}. Immutable.' }),
  eventName: z.string().meta({ description: 'Event a verified post maps to; its data is the posted JSON body (unless `transform` says otherwise).' }),
  transform: TransformFields.optional(),
  scheme: z.string().meta({ description: 'Signature scheme: `hmac-sha256`.' }),
  enabled: z.boolean().meta({ description: 'A disabled receiver refuses posts with 403 (recorded).' }),
  createdAt: timestamp(),
};

export const WebhookReceiver = component(
  'WebhookReceiver',
  z.object(receiverFields),
  'An inbound receiver. The signing secret is never returned by a read.',
);
export const CreatedWebhookReceiver = component(
  'CreatedWebhookReceiver',
  z.object({ ...receiverFields, secret: z.string().meta({ description: SECRET_NOTE }) }),
  'The created receiver with its secret, shown once.',
);
export const UpdatedWebhookReceiver = component(
  'UpdatedWebhookReceiver',
  z.object({
    ...receiverFields,
    secret: z
      .string()
      .optional()
      .meta({ description: `Present only when the PATCH rotated it. ${SECRET_NOTE}` }),
  }),
  'The edited receiver; `secret` only when rotateSecret was true (the old secret stops verifying at once).',
);

const SLUG = str()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_-]{2,127}$/, 'must be 3-128 letters, digits, - or _, starting with a letter or digit')
  .meta({ description: 'Public URL segment; generated when absent. A slug in use (in any workspace) is 409 slug_taken.' });
const SECRET = str().min(16).max(256).meta({ description: 'Adopt a known signing secret (16-256 characters) instead of a generated one.' });

export const CreateWebhookReceiverBody = component(
  'CreateWebhookReceiverBody',
  z.object({
    name: name('Label.').optional(),
    app: name('App the produced event belongs to.').optional(),
    eventName: name('Event a verified post maps to.'),
    targetApp: name('Target app for the produced event.').optional(),
    transform: TransformFields.optional(),
    slug: SLUG.optional(),
    secret: SECRET.optional(),
  }),
);

export const PatchWebhookReceiverBody = component(
  'PatchWebhookReceiverBody',
  z
    .object({
      name: name('Label; null clears it.').nullable().optional(),
      app: name('null clears it.').nullable().optional(),
      eventName: name().optional(),
      targetApp: name('null clears it.').nullable().optional(),
      transform: TransformFields.nullable().optional().meta({ description: 'Replaces the transform; null removes it.' }),
      enabled: z.boolean().optional(),
      rotateSecret: z.boolean().optional().meta({ description: 'true issues a new secret, returned once in this response.' }),
    })
    .strict(),
  'Omitted fields are unchanged. The slug is immutable.',
);

export const SOURCE_OUTCOMES = ['verified', 'filtered', 'invalid_signature', 'stale_timestamp', 'disabled', 'too_large', 'invalid_body', 'transform_failed'] as const;

export const WebhookSourceDelivery = component(
  'WebhookSourceDelivery',
  z.object({
    id: z.string(),
    receiverId: z.string(),
    slug: z.string(),
    outcome: z
      .enum(SOURCE_OUTCOMES)
      .meta({ description: "What became of the post; only `verified` produced an event (`filtered`: verified, and the transform's `if` was false)." }),
    verified: z.boolean(),
    reason: z.string().optional().meta({ description: 'Which signature scheme verified or failed, and why (never the signature).' }),
    sizeBytes: z.number().int(),
    headers: z
      .record(z.string(), z.string())
      .meta({
        description:
          'Headers of interest: content-type, user-agent, x-service-delivery-id, x-github-event, x-github-delivery, x-gitlab-event, x-shopify-topic, x-event-key.',
      }),
    eventId: z.string().optional().meta({ description: 'The event-log record the post became (absent when refused or deduped).' }),
    createdAt: timestamp(),
  }),
  'One post that arrived at /v1/webhooks/{slug} for a known slug, verified or not. The body is not kept here: a verified body is the event data.',
);

export const ListSourceDeliveriesQuery = component(
  'ListSourceDeliveriesQuery',
  z.object({ limit: limit(30, 200), cursor: str().optional().meta({ description: 'X-Next-Cursor of the previous page.' }) }),
);

export const SlugParams = z.object({ slug: name('Receiver slug.') });

export const InboundWebhookBody = component(
  'InboundWebhookBody',
  json('Any JSON, up to 1 MiB. Signed over the exact bytes sent; becomes the data of the event named by the receiver eventName.'),
);

export const InboundAccepted = component(
  'InboundAccepted',
  z.object({
    deliveryId: z.string().meta({ description: 'The source-delivery record.' }),
    eventId: z
      .string()
      .optional()
      .meta({ description: "The event it became; absent when a repeated delivery id was deduped, or the transform's `if` filtered it out." }),
    deduped: z.boolean(),
    filtered: z.boolean().optional().meta({ description: "true when the receiver's transform `if` was false: no event." }),
  }),
);
