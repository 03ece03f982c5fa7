import type { Database } from '@dws/db';
import { conflict, invalid, notFound } from '@dws/protocol';
import { ids, type ApiHandler } from '@dws/runtime';
import { checkUrl } from '../domain/address.js';
import { MAX_ATTEMPTS } from '../domain/attempts.js';
import { deliveryRecord, attemptRecord, STATUSES } from '../domain/delivery.js';
import { endpointRecord, generateSecret, parseEndpointInput } from '../domain/endpoint.js';
import type { SealKeyring } from '@dws/protocol';
import { attemptsOf, deliveryById, endpointStats, listDeliveries, requeue } from '../store/deliveries.js';
import { deleteEndpoint, insertEndpoint, listEndpoints, updateEndpoint } from '../store/endpoints.js';

/** SPEC Limits: delivery pages default 30, at most 200 (more is clamped). */
const LIMIT = { def: 30, min: 1, max: 200 };
/** SPEC Limits: the stats window without `since`. */
const STATS_WINDOW_MS = 30 * 24 * 3600_000;

const one = (v: unknown): unknown => (Array.isArray(v) ? v[0] : v);
const text = (v: unknown): string | undefined => (typeof one(v) === 'string' && one(v) !== '' ? (one(v) as string) : undefined);

function limitOf(query: Record<string, unknown>): number {
  const s = text(query.limit)?.trim();
  if (s === undefined) return LIMIT.def;
  if (!/^[+-]?\d+$/.test(s)) throw invalid('invalid_limit', 'limit must be an integer.');
  return Math.min(LIMIT.max, Math.max(LIMIT.min, Number(s)));
}

const encodeCursor = (at: string, id: string): string => Buffer.from(JSON.stringify([at, id])).toString('base64url');
function decodeCursor(raw: string): { at: string; id: string } {
  try {
    const v = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as unknown;
    if (Array.isArray(v) && typeof v[0] === 'string' && !Number.isNaN(Date.parse(v[0])) && typeof v[1] === 'string') return { at: v[0], id: v[1] };
  } catch {
    // fall through: answered as a 400 below
  }
  throw invalid('invalid_cursor', 'cursor is not one this API returned.');
}

export interface ApiDeps {
  db: Database;
  secrets: SealKeyring;
  allowPrivate: boolean;
  /** A delivery became due now (redeliver): wake the sender instead of waiting for its poll. */
  onQueued: () => void;
}

/**
 * The outbound webhooks API behind the gateway (svc.webhook-dispatcher.api).
 * Permission (a public key may not write) is the gateway's; every query is
 * scoped to the caller's workspace, so another workspace's id is a 404.
 */
export function dispatcherApi(d: ApiDeps): Record<string, ApiHandler> {
  const sealed = (secret: string) => {
    const { sealed: secretSealed, keyId: sealKeyId } = d.secrets.seal(secret);
    return { secretSealed, sealKeyId };
  };
  const refusePrivate = async (url: string) => {
    const problem = await checkUrl(url, d.allowPrivate);
    if (problem) throw invalid('invalid_webhook_endpoint', `url: ${problem.message}`);
  };
  return {
    async 'endpoints.list'({ caller }) {
      return { body: (await listEndpoints(d.db, caller.workspaceId)).map(endpointRecord) };
    },

    async 'endpoints.create'({ caller, body }) {
      const input = parseEndpointInput(body, false);
      await refusePrivate(input.url!);
      const secret = input.secret ?? generateSecret();
      const row = await insertEndpoint(d.db, {
        id: ids.generic('whe'),
        workspaceId: caller.workspaceId,
        name: input.name ?? null,
        app: input.app ?? null,
        url: input.url!,
        eventKinds: input.eventKinds!,
        ...sealed(secret),
      });
      // The one response that carries the secret (with a rotating PATCH).
      return { status: 201, body: { ...endpointRecord(row), secret } };
    },

    async 'endpoints.update'({ caller, params, body }) {
      const input = parseEndpointInput(body, true);
      if (input.url !== undefined) await refusePrivate(input.url);
      const secret = input.rotateSecret ? generateSecret() : undefined;
      const row = await updateEndpoint(d.db, caller.workspaceId, params.id ?? '', {
        name: input.name,
        app: input.app,
        url: input.url,
        eventKinds: input.eventKinds,
        enabled: input.enabled,
        ...(secret ? sealed(secret) : {}),
      });
      if (!row) throw notFound('webhook endpoint');
      return { body: { ...endpointRecord(row), ...(secret ? { secret } : {}) } };
    },

    async 'endpoints.delete'({ caller, params }) {
      if (!(await deleteEndpoint(d.db, caller.workspaceId, params.id ?? ''))) throw notFound('webhook endpoint');
      return { status: 204 };
    },

    async 'endpoints.stats'({ caller, query }) {
      const raw = text(query.since);
      const since = raw === undefined ? new Date(Date.now() - STATS_WINDOW_MS) : new Date(raw);
      if (raw !== undefined && (Number.isNaN(since.getTime()) || !/^\d{4}-\d{2}-\d{2}T/.test(raw))) throw invalid('invalid_since', 'since must be an RFC 3339 timestamp.');
      const rows = await endpointStats(d.db, caller.workspaceId, since);
      return {
        body: rows.map((r) => ({
          endpointId: r.endpoint_id,
          delivered: Number(r.delivered),
          succeeded: Number(r.succeeded),
          failed: Number(r.failed),
          ...(r.last_delivery ? { lastDelivery: new Date(r.last_delivery).toISOString() } : {}),
        })),
      };
    },

    async 'deliveries.list'({ caller, query }) {
      const status = text(query.status);
      if (status !== undefined && !STATUSES.includes(status as (typeof STATUSES)[number])) throw invalid('invalid_status', `status must be one of ${STATUSES.join(', ')}.`);
      const cursor = text(query.cursor);
      const limit = limitOf(query);
      const rows = await listDeliveries(d.db, caller.workspaceId, { status, app: text(query.app), limit: limit + 1, after: cursor ? decodeCursor(cursor) : undefined });
      const page = rows.slice(0, limit);
      const last = page[page.length - 1];
      const headers: Record<string, string> = {};
      // SPEC: X-Next-Cursor only when more rows exist; absent on the last page.
      if (rows.length > limit && last) headers['x-next-cursor'] = encodeCursor(last.cursor_at, last.id);
      return { body: page.map(deliveryRecord), headers };
    },

    async 'deliveries.get'({ caller, params }) {
      const row = await deliveryById(d.db, caller.workspaceId, params.id ?? '');
      if (!row) throw notFound('webhook delivery');
      return { body: { ...deliveryRecord(row), attempts: (await attemptsOf(d.db, row.id)).map(attemptRecord) } };
    },

    async 'deliveries.redeliver'({ caller, params }) {
      await d.db.tx(async (tx) => {
        // The row lock orders this against a sender claiming the delivery: one of them sees the other's status.
        const row = await deliveryById(tx, caller.workspaceId, params.id ?? '', true);
        if (!row) throw notFound('webhook delivery');
        if (row.status === 'delivering') throw conflict('delivery_in_flight', 'The delivery is being attempted now; redeliver it once the attempt ends.');
        await requeue(tx, row.id, MAX_ATTEMPTS);
      });
      d.onQueued();
      return { status: 204 };
    },
  };
}
