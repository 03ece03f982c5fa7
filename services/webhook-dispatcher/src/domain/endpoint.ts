import { randomBytes } from 'node:crypto';
import { invalid } from '@dws/protocol';
import { checkUrlSyntax } from './address.js';

/** Lifecycle kinds an endpoint may subscribe to (SPEC Events 5; `custom` is a ctx.webhook.send, never subscribed). */
export const EVENT_KINDS = ['run.succeeded', 'run.failed', 'run.cancelled', 'step.failed'] as const;
export type EventKind = (typeof EVENT_KINDS)[number];

/** The signature scheme of every endpoint: X-Service-Signature, HMAC-SHA256 over `<t>.<rawBody>`. */
export const SCHEME = 'hmac-sha256';

const bad = (field: string, message: string) => invalid('invalid_webhook_endpoint', `${field}: ${message}`);

export interface EndpointInput {
  name?: string | null;
  app?: string | null;
  url?: string;
  eventKinds?: EventKind[];
  secret?: string;
  enabled?: boolean;
  rotateSecret?: boolean;
}

function optText(body: Record<string, unknown>, field: string, max: number): string | null | undefined {
  const v = body[field];
  if (v === undefined) return undefined;
  if (v === null || v === '') return null;
  if (typeof v !== 'string' || v.length > max) throw bad(field, `must be a string of at most ${max} characters.`);
  return v;
}

/**
 * Checks a create (`partial` false) or PATCH body field by field; a wrong
 * field is a 400 `invalid_webhook_endpoint` whose message starts with its
 * name. Unknown fields are refused so a typo is not silently ignored.
 */
export function parseEndpointInput(raw: unknown, partial: boolean): EndpointInput {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw bad('body', 'must be a JSON object.');
  const body = raw as Record<string, unknown>;
  const allowed = partial ? ['name', 'app', 'url', 'eventKinds', 'enabled', 'rotateSecret'] : ['name', 'app', 'url', 'eventKinds', 'secret'];
  const unknown = Object.keys(body).find((k) => !allowed.includes(k));
  if (unknown) throw bad(unknown, `is not a field of this request (allowed: ${allowed.join(', ')}).`);
  const out: EndpointInput = { name: optText(body, 'name', 200), app: optText(body, 'app', 200) };
  if (body.url !== undefined || !partial) {
    if (typeof body.url !== 'string') throw bad('url', 'is required: an absolute http or https URL.');
    if (body.url.length > 2048) throw bad('url', 'must be at most 2048 characters.');
    const problem = checkUrlSyntax(body.url);
    if (problem) throw bad('url', problem.message);
    out.url = body.url;
  }
  if (body.eventKinds !== undefined || !partial) {
    const k = body.eventKinds;
    if (!Array.isArray(k) || k.length === 0 || !k.every((x) => typeof x === 'string' && (EVENT_KINDS as readonly string[]).includes(x))) {
      throw bad('eventKinds', `must be a non-empty array of ${EVENT_KINDS.join(', ')}.`);
    }
    out.eventKinds = [...new Set(k as EventKind[])];
  }
  if (body.secret !== undefined) {
    if (typeof body.secret !== 'string' || body.secret.length < 16 || body.secret.length > 256) throw bad('secret', 'must be a string of 16 to 256 characters.');
    out.secret = body.secret;
  }
  for (const f of ['enabled', 'rotateSecret'] as const) {
    if (body[f] !== undefined && typeof body[f] !== 'boolean') throw bad(f, 'must be a boolean.');
  }
  if (typeof body.enabled === 'boolean') out.enabled = body.enabled;
  if (body.rotateSecret === true) out.rotateSecret = true;
  return out;
}

/** A generated secret: 32 random bytes, base64url, prefixed so a leaked one is recognisable. */
export const generateSecret = (): string => `whsec_${randomBytes(32).toString('base64url')}`;

export interface EndpointRow {
  id: string;
  name: string | null;
  app: string | null;
  url: string;
  event_kinds: string[];
  enabled: boolean;
  created_at: Date | string;
  updated_at: Date | string;
}

const iso = (v: Date | string): string => new Date(v).toISOString();

/** The read shape (SPEC Webhook endpoint config): never the secret. */
export function endpointRecord(r: EndpointRow): Record<string, unknown> {
  return {
    id: r.id,
    ...(r.name ? { name: r.name } : {}),
    ...(r.app ? { app: r.app } : {}),
    url: r.url,
    scheme: SCHEME,
    eventKinds: r.event_kinds,
    enabled: r.enabled,
    createdAt: iso(r.created_at),
    updatedAt: iso(r.updated_at),
  };
}
