import { randomBytes } from 'node:crypto';
import type { Database } from '@dws/db';
import type { Logger } from '@dws/log';
import { conflict, INBOUND_HEADERS, invalid, notFound, ServiceError, tooLarge, type SealKeyring } from '@dws/protocol';
import { ids, type ApiHandler, type Caller } from '@dws/runtime';
import { parseEvent, type EventInput } from '../domain/event-input.js';
import { verifyInbound } from '../domain/inbound-signature.js';
import { applyTransform, parseTransform } from '../domain/receiver-transform.js';
import {
  deleteReceiver,
  insertReceiver,
  insertSourceDelivery,
  listReceivers,
  listSourceDeliveries,
  receiverById,
  receiverBySlug,
  updateReceiver,
  type ReceiverPatch,
  type ReceiverRow,
  type SourceDeliveryRow,
} from '../store/receivers.js';
import type { IngestResult, Ingestor } from './ingestor.js';
import { iso } from './read-values.js';

/** SPEC Limits: an inbound webhook payload over 1 MiB is rejected. */
export const MAX_INBOUND_BYTES = 1024 * 1024;
/** SPEC Limits: cursor pages default 30, max 200 (over is clamped). */
const PAGE_DEFAULT = 30;
const PAGE_MAX = 200;
const MAX_LEN = 256;
/** An adopted secret shorter than this is refused: a guessable secret makes the signature worthless. */
const MIN_SECRET = 16;
const SLUG_RE = /^[A-Za-z0-9][A-Za-z0-9_-]{2,127}$/;
/** Partner delivery ids that become the event's dedupeId, so a partner's retry of one post starts nothing twice (24 h, per app). */
const DELIVERY_ID_HEADERS = ['x-service-delivery-id', 'x-github-delivery'];

const bad = (field: string, message: string) => invalid('invalid_webhook_receiver', `${field}: ${message}`);

function optString(o: Record<string, unknown>, field: string, nullable: boolean): string | null | undefined {
  const v = o[field];
  if (v === undefined) return undefined;
  if (v === null && nullable) return null;
  if (typeof v !== 'string' || v.trim() === '') throw bad(field, 'must be a non-blank string.');
  if (v.length > MAX_LEN) throw bad(field, `is over ${MAX_LEN} characters.`);
  return v;
}

function bodyObject(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw bad('body', 'must be a JSON object.');
  return body as Record<string, unknown>;
}

function adoptedSecret(o: Record<string, unknown>): string | undefined {
  const v = o.secret;
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || v.length < MIN_SECRET || v.length > MAX_LEN)
    throw bad('secret', `must be a string of ${MIN_SECRET}-${MAX_LEN} characters.`);
  return v;
}

/** 32 random bytes, hex. */
const newSecret = () => randomBytes(32).toString('hex');
const newSlug = () => randomBytes(12).toString('hex');

/** SPEC Webhook receiver config: no secret, ever. `scheme` names what the service verifies first. */
function receiverRecord(r: ReceiverRow) {
  return {
    id: r.id,
    name: r.name ?? undefined,
    app: r.app ?? undefined,
    targetApp: r.target_app ?? undefined,
    slug: r.slug,
    eventName: r.event_name,
    ...(r.transform && { transform: r.transform }),
    scheme: 'hmac-sha256',
    enabled: r.enabled,
    createdAt: iso(r.created_at),
  };
}

function sourceDeliveryRecord(r: SourceDeliveryRow) {
  return {
    id: r.id,
    receiverId: r.receiver_id,
    slug: r.slug,
    outcome: r.outcome,
    // The signature verified (whatever the transform then made of the post).
    verified: r.outcome === 'verified' || r.outcome === 'filtered' || r.outcome === 'transform_failed',
    reason: r.reason ?? undefined,
    sizeBytes: r.size_bytes,
    headers: r.headers,
    eventId: r.event_id ?? undefined,
    createdAt: iso(r.created_at),
  };
}

function pageLimit(v: unknown): number {
  if (v === undefined) return PAGE_DEFAULT;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw invalid('invalid_limit', `limit must be an integer from 1 to ${PAGE_MAX}.`);
  return Math.min(n, PAGE_MAX);
}

const encodeCursor = (r: SourceDeliveryRow) => Buffer.from(JSON.stringify([r.created_text, r.id])).toString('base64url');
function decodeCursor(v: unknown): { createdAt: string; id: string } | undefined {
  if (v === undefined) return undefined;
  try {
    const [createdAt, id] = JSON.parse(Buffer.from(String(v), 'base64url').toString('utf8')) as unknown[];
    if (typeof createdAt === 'string' && typeof id === 'string' && !Number.isNaN(Date.parse(createdAt))) return { createdAt, id };
  } catch {
    // falls through to the 400
  }
  throw invalid('invalid_cursor', 'cursor is not a cursor issued by GET /webhook-source-deliveries.');
}

/** What the gateway forwards for POST /v1/webhooks/{slug}: the request bytes as text, unchanged, and its headers. */
interface InboundPost {
  rawBody?: string;
  headers?: Record<string, string>;
  /** Bytes the gateway saw; set with `tooLarge` when it stopped reading at 1 MiB. */
  sizeBytes?: number;
  tooLarge?: boolean;
}

/** SPEC Webhook receivers and Events 6: the receiver configs, the inbound post, and the record of what arrived. */
export function receiverApi(d: { db: Database; ingestor: Ingestor; log: Logger; seal: SealKeyring }): Record<string, ApiHandler> {
  const { db, log } = d;
  const sealSecret = (secret: string) => d.seal.seal(secret);

  /** Record a post that made no event; @returns the record's id. */
  async function recordPost(r: ReceiverRow, outcome: string, reason: string, sizeBytes: number, headers: Record<string, string>): Promise<string> {
    const id = ids.generic('whsd');
    await insertSourceDelivery(db, { id, workspaceId: r.workspace_id, receiverId: r.id, slug: r.slug, outcome, reason, sizeBytes, headers });
    return id;
  }

  async function refuse(
    r: ReceiverRow,
    outcome: string,
    reason: string,
    sizeBytes: number,
    headers: Record<string, string>,
    err: ServiceError,
  ): Promise<never> {
    await recordPost(r, outcome, reason, sizeBytes, headers);
    throw err;
  }

  return {
    async 'receivers.list'({ caller }) {
      return { body: (await listReceivers(db, caller.workspaceId)).map(receiverRecord) };
    },

    async 'receivers.create'({ caller, body }) {
      const o = bodyObject(body);
      const eventName = optString(o, 'eventName', false);
      if (!eventName) throw bad('eventName', 'is required.');
      const given = optString(o, 'slug', false) ?? undefined;
      if (given !== undefined && !SLUG_RE.test(given))
        throw bad('slug', 'must be 3-128 characters of letters, digits, - and _, starting with a letter or digit.');
      const secret = adoptedSecret(o) ?? newSecret();
      const s = sealSecret(secret);
      const row = await insertReceiver(db, {
        id: ids.generic('whr'),
        workspaceId: caller.workspaceId,
        name: optString(o, 'name', false) ?? undefined,
        app: optString(o, 'app', false) ?? undefined,
        targetApp: optString(o, 'targetApp', false) ?? undefined,
        slug: given ?? newSlug(),
        eventName,
        transform: parseTransform(o.transform, bad),
        secretSealed: s.sealed,
        secretKeyId: s.keyId,
      });
      // SPEC Errors: a caller-supplied slug in use (by any workspace: it is the global routing key) is 409.
      if (!row) throw conflict('slug_taken', `slug ${given ?? ''} is already in use.`);
      return { status: 201, body: { ...receiverRecord(row), secret } };
    },

    async 'receivers.update'({ caller, params, body }) {
      const o = bodyObject(body);
      if (o.slug !== undefined) throw bad('slug', 'is immutable after create.');
      if (o.secret !== undefined) throw bad('secret', 'cannot be set by PATCH; send rotateSecret: true for a new one.');
      if (o.enabled !== undefined && typeof o.enabled !== 'boolean') throw bad('enabled', 'must be a boolean.');
      if (o.rotateSecret !== undefined && typeof o.rotateSecret !== 'boolean') throw bad('rotateSecret', 'must be a boolean.');
      const eventName = optString(o, 'eventName', false);
      const secret = o.rotateSecret === true ? newSecret() : undefined;
      const patch: ReceiverPatch = {
        name: optString(o, 'name', true),
        app: optString(o, 'app', true),
        targetApp: optString(o, 'targetApp', true),
        eventName: eventName ?? undefined,
        transform: o.transform === undefined ? undefined : (parseTransform(o.transform, bad) ?? null),
        enabled: o.enabled as boolean | undefined,
        secret: secret === undefined ? undefined : sealSecret(secret),
      };
      const row = await updateReceiver(db, caller.workspaceId, params.id ?? '', patch);
      if (!row) throw notFound('webhook receiver');
      return { body: secret === undefined ? receiverRecord(row) : { ...receiverRecord(row), secret } };
    },

    async 'receivers.delete'({ caller, params }) {
      if (!(await deleteReceiver(db, caller.workspaceId, params.id ?? ''))) throw notFound('webhook receiver');
      return { status: 204 };
    },

    async 'sourceDeliveries.list'({ caller, query }) {
      const limit = pageLimit(query.limit);
      const rows = await listSourceDeliveries(db, caller.workspaceId, { limit, after: decodeCursor(query.cursor) });
      const page = rows.slice(0, limit);
      const headers: Record<string, string> = {};
      if (rows.length > limit) headers['x-next-cursor'] = encodeCursor(page[page.length - 1]!);
      return { body: page.map(sourceDeliveryRecord), headers };
    },

    /**
     * POST /v1/webhooks/{slug}, forwarded without an API key: the signature
     * is the credential. An unknown slug is 404 and not recorded (it names no
     * workspace); every other outcome is recorded before it is answered.
     */
    async 'webhooks.receive'({ caller, params, body }) {
      const post = (body ?? {}) as InboundPost;
      const row = await receiverBySlug(db, params.slug ?? '');
      if (!row) throw notFound('webhook receiver');
      const lower: Record<string, string> = {};
      for (const [k, v] of Object.entries(post.headers ?? {})) if (typeof v === 'string') lower[k.toLowerCase()] = v;
      const kept: Record<string, string> = {};
      for (const k of INBOUND_HEADERS) if (lower[k] !== undefined) kept[k] = lower[k].slice(0, MAX_LEN);
      const raw = typeof post.rawBody === 'string' ? post.rawBody : '';
      const size = Math.max(Buffer.byteLength(raw, 'utf8'), Number(post.sizeBytes) || 0);
      if (post.tooLarge === true || size > MAX_INBOUND_BYTES) {
        await refuse(row, 'too_large', `body of ${size} bytes is over 1 MiB`, size, kept, tooLarge('Webhook payload exceeds 1 MiB.'));
      }
      if (!row.enabled) {
        await refuse(
          row,
          'disabled',
          'the receiver is disabled',
          size,
          kept,
          new ServiceError(403, 'webhook_receiver_disabled', 'This webhook receiver is disabled.'),
        );
      }
      if (!d.seal.has(row.secret_key_id)) {
        // A row sealed under a key this process was not given: an operator error, not the partner's.
        log.error({ receiverId: row.id, keyId: row.secret_key_id }, 'webhook receiver secret sealed under an unknown seal key');
        throw new ServiceError(
          503,
          'seal_key_unavailable',
          'The receiver secret cannot be read; the operator must configure its seal key.',
        );
      }
      const verdict = verifyInbound(d.seal.open(row.secret_sealed, row.secret_key_id), lower, raw);
      if (!verdict.ok) {
        const stale = verdict.reason === 'expired';
        await refuse(
          row,
          stale ? 'stale_timestamp' : 'invalid_signature',
          `${verdict.scheme ?? 'no'} signature ${verdict.reason}`,
          size,
          kept,
          new ServiceError(
            401,
            'invalid_signature',
            stale ? 'The signature timestamp is more than 5 minutes from now.' : 'The webhook signature is missing or does not verify.',
          ),
        );
      }
      const scheme = verdict.ok ? verdict.scheme : undefined;
      let data: unknown;
      try {
        data = raw.trim() === '' ? null : JSON.parse(raw);
      } catch {
        await refuse(row, 'invalid_body', 'body is not JSON', size, kept, invalid('invalid_body', 'The webhook body is not valid JSON.'));
      }
      const dedupe = DELIVERY_ID_HEADERS.map((h) => lower[h]).find((v) => v !== undefined && v !== '' && v.length <= MAX_LEN);
      const made = applyTransform(row.transform ?? undefined, { body: data, headers: kept }, { name: row.event_name, dedupeId: dedupe });
      if (made.kind === 'filtered') {
        const deliveryId = await recordPost(row, 'filtered', `${scheme} signature; ${made.reason}`, size, kept);
        return { status: 202, body: { deliveryId, deduped: false, filtered: true } };
      }
      const transformFailed = (reason: string) =>
        refuse(
          row,
          'transform_failed',
          reason,
          size,
          kept,
          new ServiceError(422, 'transform_failed', `The receiver's transform failed: ${reason}.`),
        );
      if (made.kind === 'failed') return transformFailed(made.reason);
      let ev: EventInput;
      try {
        ev = parseEvent({ name: made.name, app: row.app, targetApp: row.target_app, data: made.data, dedupeId: made.dedupeId });
      } catch (err) {
        // Only a transform can make an event the event rules refuse (a name over 256 characters, say).
        return transformFailed(err instanceof ServiceError ? err.message.replace(/\.$/, '') : String(err));
      }
      const webhookCaller: Caller = {
        workspaceId: row.workspace_id,
        actor: `webhook:${row.slug}`,
        keyKind: 'webhook',
        requestId: caller.requestId,
      };
      const deliveryId = ids.generic('whsd');
      // The record commits with the event (one transaction): no event without its record, no record of an event that never was.
      const record = (tx: Database, r: IngestResult) =>
        insertSourceDelivery(tx, {
          id: deliveryId,
          workspaceId: row.workspace_id,
          receiverId: row.id,
          slug: row.slug,
          outcome: 'verified',
          reason: r.deduped ? `${scheme} signature; a repeat delivery id (deduped)` : `${scheme} signature`,
          sizeBytes: size,
          headers: kept,
          eventId: r.id,
        });
      const [res] = await d.ingestor.ingest(webhookCaller, [{ ev, source: 'api', record }]);
      return { status: 202, body: { deliveryId, eventId: res!.id, deduped: res!.deduped } };
    },
  };
}
