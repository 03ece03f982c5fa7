import type { Database } from '@dws/db';

export async function upsertWorkspace(
  db: Database,
  ws: { id: string; name: string; signingKeySealed: string; suspended: boolean; providersSealed: string | null },
): Promise<void> {
  await db.query(
    `insert into invoker.workspaces (id, name, signing_key_sealed, suspended, providers_sealed, updated_at) values ($1, $2, $3, $4, $5, now())
     on conflict (id) do update set name = excluded.name, signing_key_sealed = excluded.signing_key_sealed,
       suspended = excluded.suspended, providers_sealed = excluded.providers_sealed, updated_at = now()`,
    [ws.id, ws.name, ws.signingKeySealed, ws.suspended, ws.providersSealed],
  );
}

export async function workspaceSigningKey(db: Database, id: string): Promise<string | undefined> {
  const rows = await db.query<{ signing_key_sealed: string }>(
    'select signing_key_sealed from invoker.workspaces where id = $1',
    [id],
  );
  return rows[0]?.signing_key_sealed;
}

/** The sealed JSON of a workspace's own model providers, or null when it has none. */
export async function workspaceProvidersSealed(db: Database, id: string): Promise<string | null> {
  const rows = await db.query<{ providers_sealed: string | null }>('select providers_sealed from invoker.workspaces where id = $1', [id]);
  return rows[0]?.providers_sealed ?? null;
}
