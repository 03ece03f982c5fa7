import type { Database } from '@dws/db';
import { ids } from '@dws/runtime';
import { hashKey, type KeyKind } from '../domain/keys.js';
import type { SuspendedReason } from '../domain/usage.js';

export interface KeyRecord {
  workspaceId: string;
  kind: KeyKind;
  name: string;
  suspended: boolean;
}

export async function keyByHash(db: Database, hash: string): Promise<KeyRecord | undefined> {
  const rows = await db.query<{ workspace_id: string; kind: KeyKind; name: string; suspended: boolean }>(
    `select k.workspace_id, k.kind, k.name, w.suspended from gateway.api_keys k join gateway.workspaces w on w.id = k.workspace_id
      where k.key_hash = $1 and k.revoked_at is null`,
    [hash],
  );
  const r = rows[0];
  return r && { workspaceId: r.workspace_id, kind: r.kind, name: r.name, suspended: r.suspended };
}

const WORKSPACE_COLUMNS = 'id, name, signing_key_sealed, suspended, suspended_reason, limits, providers_sealed, retention_days, created_at';

export async function workspaceById(db: Database, id: string): Promise<WorkspaceRow | undefined> {
  const rows = await db.query<WorkspaceRow>(`select ${WORKSPACE_COLUMNS} from gateway.workspaces where id = $1`, [id]);
  return rows[0];
}

/**
 * The workspace with its row lock held until commit. Whoever changes
 * suspension or limits (PATCH, the meter, the rollover sweep) takes this lock
 * first and the usage row second, so they serialise and never deadlock.
 */
export async function lockWorkspace(tx: Database, id: string): Promise<WorkspaceRow | undefined> {
  const rows = await tx.query<WorkspaceRow>(`select ${WORKSPACE_COLUMNS} from gateway.workspaces where id = $1 for update`, [id]);
  return rows[0];
}

export async function insertWorkspace(db: Database, ws: { id: string; name: string; signingKeySealed: string }): Promise<void> {
  await db.query(
    'insert into gateway.workspaces (id, name, signing_key_sealed) values ($1, $2, $3) on conflict (id) do nothing',
    [ws.id, ws.name, ws.signingKeySealed],
  );
}

export async function setSigningKey(db: Database, id: string, sealed: string): Promise<void> {
  await db.query('update gateway.workspaces set signing_key_sealed = $2 where id = $1', [id, sealed]);
}

/** Store a key (hashed); a key that is already stored is left as it is. */
export async function insertKey(db: Database, k: { workspaceId: string; kind: KeyKind; name: string; key: string; sealed?: string }): Promise<string> {
  const id = ids.key();
  await db.query(
    `insert into gateway.api_keys (id, workspace_id, kind, name, key_hash, sealed) values ($1, $2, $3, $4, $5, $6)
     on conflict (key_hash) do nothing`,
    [id, k.workspaceId, k.kind, k.name, hashKey(k.key), k.sealed ?? null],
  );
  return id;
}

/** Generated dev keys of a workspace (sealed copies), to print them at each start. */
export async function sealedDevKeys(db: Database, workspaceId: string): Promise<{ kind: KeyKind; sealed: string }[]> {
  return db.query<{ kind: KeyKind; sealed: string }>(
    `select kind, sealed from gateway.api_keys where workspace_id = $1 and sealed is not null and revoked_at is null order by created_at`,
    [workspaceId],
  );
}

export interface WorkspaceRow {
  id: string;
  name: string;
  signing_key_sealed: string;
  suspended: boolean;
  suspended_reason: SuspendedReason | null;
  limits: Record<string, unknown>;
  /** Sealed JSON of the workspace's own model providers; null when it has none. */
  providers_sealed: string | null;
  /** Days the services keep the workspace's history; null: the default. */
  retention_days: number | null;
  created_at: Date | string;
}

/** Write suspension, limits, providers and retention of a workspace locked by `lockWorkspace` (decided by the caller). */
export async function saveWorkspaceState(
  tx: Database,
  id: string,
  state: { suspended: boolean; reason: SuspendedReason | null; limits: Record<string, unknown>; providersSealed: string | null; retentionDays: number | null },
): Promise<WorkspaceRow> {
  const rows = await tx.query<WorkspaceRow>(
    `update gateway.workspaces set suspended = $2, suspended_reason = $3, limits = $4::jsonb, providers_sealed = $5, retention_days = $6
      where id = $1 returning ${WORKSPACE_COLUMNS}`,
    [id, state.suspended, state.reason, JSON.stringify(state.limits), state.providersSealed, state.retentionDays],
  );
  return rows[0]!;
}

/** Revoke a key of a workspace; false when the workspace has no such key. Revoking twice is fine. */
export async function revokeKey(db: Database, workspaceId: string, keyId: string): Promise<boolean> {
  const rows = await db.query<{ id: string }>(
    `update gateway.api_keys set revoked_at = coalesce(revoked_at, now()) where id = $1 and workspace_id = $2 returning id`,
    [keyId, workspaceId],
  );
  return rows.length === 1;
}
