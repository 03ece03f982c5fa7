import type { Database } from '@dws/db';
import type { ReceiverTransform } from '../domain/receiver-transform.js';

export interface ReceiverRow {
  id: string;
  workspace_id: string;
  name: string | null;
  app: string | null;
  target_app: string | null;
  slug: string;
  event_name: string;
  transform: ReceiverTransform | null;
  secret_sealed: string;
  secret_key_id: string;
  enabled: boolean;
  created_at: Date | string;
}

export interface NewReceiver {
  id: string;
  workspaceId: string;
  name?: string;
  app?: string;
  targetApp?: string;
  slug: string;
  eventName: string;
  transform?: ReceiverTransform;
  secretSealed: string;
  secretKeyId: string;
}

const COLS = 'id, workspace_id, name, app, target_app, slug, event_name, transform, secret_sealed, secret_key_id, enabled, created_at';

/** @returns the row, or undefined when the slug is taken (the slug is global: any workspace's receiver holds it). */
export async function insertReceiver(db: Database, r: NewReceiver): Promise<ReceiverRow | undefined> {
  const rows = await db.query<ReceiverRow>(
    `insert into ingest.receivers (id, workspace_id, name, app, target_app, slug, event_name, transform, secret_sealed, secret_key_id)
     values ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9, $10) on conflict (slug) do nothing returning ${COLS}`,
    [
      r.id,
      r.workspaceId,
      r.name ?? null,
      r.app ?? null,
      r.targetApp ?? null,
      r.slug,
      r.eventName,
      r.transform ? JSON.stringify(r.transform) : null,
      r.secretSealed,
      r.secretKeyId,
    ],
  );
  return rows[0];
}

export async function listReceivers(db: Database, workspaceId: string): Promise<ReceiverRow[]> {
  return db.query<ReceiverRow>(`select ${COLS} from ingest.receivers where workspace_id = $1 order by created_at, id`, [workspaceId]);
}

/** One receiver of this workspace; another workspace's id reads as missing. */
export async function receiverById(db: Database, workspaceId: string, id: string): Promise<ReceiverRow | undefined> {
  const rows = await db.query<ReceiverRow>(`select ${COLS} from ingest.receivers where workspace_id = $1 and id = $2`, [workspaceId, id]);
  return rows[0];
}

export async function receiverBySlug(db: Database, slug: string): Promise<ReceiverRow | undefined> {
  const rows = await db.query<ReceiverRow>(`select ${COLS} from ingest.receivers where slug = $1`, [slug]);
  return rows[0];
}

export interface ReceiverPatch {
  name?: string | null;
  app?: string | null;
  targetApp?: string | null;
  eventName?: string;
  /** null removes it. */
  transform?: ReceiverTransform | null;
  enabled?: boolean;
  secret?: { sealed: string; keyId: string };
}

/** Omitted fields are unchanged; null clears an optional field. @returns the row after the edit, or undefined when missing. */
export async function updateReceiver(db: Database, workspaceId: string, id: string, p: ReceiverPatch): Promise<ReceiverRow | undefined> {
  const sets: string[] = [];
  const args: unknown[] = [workspaceId, id];
  const set = (col: string, v: unknown, cast = '') => {
    args.push(v);
    sets.push(`${col} = $${args.length}${cast}`);
  };
  if (p.name !== undefined) set('name', p.name);
  if (p.app !== undefined) set('app', p.app);
  if (p.targetApp !== undefined) set('target_app', p.targetApp);
  if (p.eventName !== undefined) set('event_name', p.eventName);
  if (p.transform !== undefined) set('transform', p.transform === null ? null : JSON.stringify(p.transform), '::jsonb');
  if (p.enabled !== undefined) set('enabled', p.enabled);
  if (p.secret) {
    set('secret_sealed', p.secret.sealed);
    set('secret_key_id', p.secret.keyId);
  }
  sets.push('updated_at = now()');
  const rows = await db.query<ReceiverRow>(
    `update ingest.receivers set ${sets.join(', ')} where workspace_id = $1 and id = $2 returning ${COLS}`,
    args,
  );
  return rows[0];
}

/** @returns whether a row of this workspace was deleted. Its source deliveries stay (they are history). */
export async function deleteReceiver(db: Database, workspaceId: string, id: string): Promise<boolean> {
  const rows = await db.query<{ id: string }>('delete from ingest.receivers where workspace_id = $1 and id = $2 returning id', [
    workspaceId,
    id,
  ]);
  return rows.length === 1;
}

// ---- source deliveries

export interface SourceDeliveryRow {
  id: string;
  receiver_id: string;
  slug: string;
  outcome: string;
  reason: string | null;
  size_bytes: number;
  headers: Record<string, string>;
  event_id: string | null;
  created_at: Date | string;
  /** created_at as Postgres prints it (microseconds kept): the cursor's key, which a JS Date would round. */
  created_text: string;
}

export interface NewSourceDelivery {
  id: string;
  workspaceId: string;
  receiverId: string;
  slug: string;
  outcome: string;
  reason?: string;
  sizeBytes: number;
  headers: Record<string, string>;
  eventId?: string;
}

export async function insertSourceDelivery(db: Database, d: NewSourceDelivery): Promise<void> {
  await db.query(
    `insert into ingest.source_deliveries (id, workspace_id, receiver_id, slug, outcome, reason, size_bytes, headers, event_id)
     values ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9)`,
    [d.id, d.workspaceId, d.receiverId, d.slug, d.outcome, d.reason ?? null, d.sizeBytes, JSON.stringify(d.headers), d.eventId ?? null],
  );
}

/** Newest first, keyset over (created_at, id): `after` is the last row of the previous page. Reads limit + 1 to know whether a page follows. */
export async function listSourceDeliveries(
  db: Database,
  workspaceId: string,
  o: { limit: number; after?: { createdAt: string; id: string } },
): Promise<SourceDeliveryRow[]> {
  const cols = 'id, receiver_id, slug, outcome, reason, size_bytes, headers, event_id, created_at, created_at::text as created_text';
  if (!o.after) {
    return db.query<SourceDeliveryRow>(
      `select ${cols} from ingest.source_deliveries where workspace_id = $1 order by created_at desc, id desc limit $2`,
      [workspaceId, o.limit + 1],
    );
  }
  return db.query<SourceDeliveryRow>(
    `select ${cols} from ingest.source_deliveries where workspace_id = $1 and (created_at, id) < ($2::timestamptz, $3)
      order by created_at desc, id desc limit $4`,
    [workspaceId, o.after.createdAt, o.after.id, o.limit + 1],
  );
}
