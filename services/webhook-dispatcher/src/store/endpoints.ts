import type { Database } from '@dws/db';
import type { EndpointRow } from '../domain/endpoint.js';

const COLS = 'id, name, app, url, event_kinds, enabled, created_at, updated_at';

export function listEndpoints(db: Database, workspaceId: string): Promise<EndpointRow[]> {
  return db.query<EndpointRow>(`select ${COLS} from webhook_dispatcher.endpoints where workspace_id = $1 order by created_at, id`, [workspaceId]);
}

export async function insertEndpoint(
  db: Database,
  e: { id: string; workspaceId: string; name: string | null; app: string | null; url: string; eventKinds: string[]; secretSealed: string; sealKeyId: string },
): Promise<EndpointRow> {
  const rows = await db.query<EndpointRow>(
    `insert into webhook_dispatcher.endpoints (id, workspace_id, name, app, url, event_kinds, secret_sealed, seal_key_id)
     values ($1, $2, $3, $4, $5, $6::text[], $7, $8) returning ${COLS}`,
    [e.id, e.workspaceId, e.name, e.app, e.url, e.eventKinds, e.secretSealed, e.sealKeyId],
  );
  return rows[0]!;
}

/** Applies the fields given (undefined leaves a column alone); undefined when the id is not the workspace's. */
export async function updateEndpoint(
  db: Database,
  workspaceId: string,
  id: string,
  p: { name?: string | null; app?: string | null; url?: string; eventKinds?: string[]; enabled?: boolean; secretSealed?: string; sealKeyId?: string },
): Promise<EndpointRow | undefined> {
  const rows = await db.query<EndpointRow>(
    `update webhook_dispatcher.endpoints set
        name = case when $3 then $4 else name end,
        app = case when $5 then $6 else app end,
        url = coalesce($7, url),
        event_kinds = coalesce($8::text[], event_kinds),
        enabled = coalesce($9, enabled),
        secret_sealed = coalesce($10, secret_sealed),
        seal_key_id = coalesce($11, seal_key_id),
        updated_at = now()
      where workspace_id = $1 and id = $2 returning ${COLS}`,
    [workspaceId, id, p.name !== undefined, p.name ?? null, p.app !== undefined, p.app ?? null, p.url ?? null, p.eventKinds ?? null, p.enabled ?? null, p.secretSealed ?? null, p.sealKeyId ?? null],
  );
  return rows[0];
}

export async function deleteEndpoint(db: Database, workspaceId: string, id: string): Promise<boolean> {
  const rows = await db.query<{ id: string }>('delete from webhook_dispatcher.endpoints where workspace_id = $1 and id = $2 returning id', [workspaceId, id]);
  return rows.length > 0;
}

export interface SubscriberQuery {
  workspaceId: string;
  app: string;
  kind: string;
}

/**
 * The enabled endpoints subscribed to each query's `kind` for its `app` (an
 * endpoint without app takes every app), for several queries in one
 * statement: one list per query, in order.
 */
export async function subscribersOf(db: Database, queries: SubscriberQuery[]): Promise<{ id: string; url: string }[][]> {
  const rows = await db.query<{ i: number; id: string; url: string }>(
    `select q.i, e.id, e.url
       from jsonb_to_recordset($1::jsonb) as q(i int, ws text, app text, kind text)
       join webhook_dispatcher.endpoints e
         on e.workspace_id = q.ws and e.enabled and (e.app is null or e.app = q.app) and q.kind = any(e.event_kinds)`,
    [JSON.stringify(queries.map((q, i) => ({ i, ws: q.workspaceId, app: q.app, kind: q.kind })))],
  );
  const out = queries.map((): { id: string; url: string }[] => []);
  for (const r of rows) out[Number(r.i)]!.push({ id: r.id, url: r.url });
  return out;
}
