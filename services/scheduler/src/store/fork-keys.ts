import type { Database } from '@dws/db';

/** How long a replay's Idempotency-Key names the run it made (as ingest keeps an event's dedupeId). */
const KEPT = `interval '24 hours'`;

/** What a key holds: the call it was sent with, and the run that call made. */
export interface ForkKey {
  fingerprint: string;
  newRunId: string;
}

/**
 * The run a key made within the last 24 h, if any. Read under the source
 * run's lock: a repeat of the same call waits for the first to commit and
 * then finds its key here.
 */
export async function forkKeyOf(tx: Database, workspaceId: string, key: string): Promise<ForkKey | undefined> {
  const rows = await tx.query<{ fingerprint: string; new_run_id: string }>(
    'select fingerprint, new_run_id from scheduler.fork_keys where workspace_id = $1 and key = $2 and expires_at > now()',
    [workspaceId, key],
  );
  const r = rows[0];
  return r && { fingerprint: r.fingerprint, newRunId: r.new_run_id };
}

/**
 * Keep `key` for the run a call made, in the transaction that made it (an
 * expired key is taken over), and forget up to 100 expired keys no one else
 * is touching. False when another call holds the key: one on another source
 * run, whose lock this one did not wait on.
 */
export async function keepForkKey(tx: Database, workspaceId: string, key: string, k: ForkKey): Promise<boolean> {
  await tx.query(
    `delete from scheduler.fork_keys where (workspace_id, key) in (
       select workspace_id, key from scheduler.fork_keys where expires_at <= now() and not (workspace_id = $1 and key = $2) limit 100 for update skip locked)`,
    [workspaceId, key],
  );
  const rows = await tx.query(
    `insert into scheduler.fork_keys as k (workspace_id, key, fingerprint, new_run_id, expires_at)
     values ($1, $2, $3, $4, now() + ${KEPT})
     on conflict (workspace_id, key) do update
       set fingerprint = excluded.fingerprint, new_run_id = excluded.new_run_id, created_at = now(), expires_at = excluded.expires_at
       where k.expires_at <= now()
     returning 1`,
    [workspaceId, key, k.fingerprint, k.newRunId],
  );
  return rows.length === 1;
}

/**
 * A bulk replay's Idempotency-Key: kept for the first call (committed before
 * it replays anything), found by a repeat. Returns when the first call began,
 * the runs a repeat may consider being those created before it (the first
 * call's own replays are not replayed again), or `reused` when the key was
 * kept for another call.
 */
export async function bulkKey(db: Database, workspaceId: string, key: string, fingerprint: string): Promise<{ at: Date; repeat: boolean } | 'reused'> {
  const made = await db.query<{ created_at: Date | string }>(
    `insert into scheduler.fork_keys as k (workspace_id, key, fingerprint, new_run_id, expires_at)
     values ($1, $2, $3, '', now() + ${KEPT})
     on conflict (workspace_id, key) do update
       set fingerprint = excluded.fingerprint, new_run_id = '', created_at = now(), expires_at = excluded.expires_at
       where k.expires_at <= now()
     returning created_at`,
    [workspaceId, key, fingerprint],
  );
  if (made[0]) return { at: new Date(made[0].created_at), repeat: false };
  const kept = await db.query<{ fingerprint: string; created_at: Date | string }>(
    'select fingerprint, created_at from scheduler.fork_keys where workspace_id = $1 and key = $2',
    [workspaceId, key],
  );
  if (!kept[0] || kept[0].fingerprint !== fingerprint) return 'reused';
  return { at: new Date(kept[0].created_at), repeat: true };
}

/** The key a bulk replay keeps for one of its source runs (a key is visible ASCII: a space cannot be in it). */
export const bulkRunKey = (key: string, runId: string): string => `${key} ${runId}`;
