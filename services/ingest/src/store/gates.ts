import type { Database } from '@dws/db';

export interface GateScope {
  workspaceId: string;
  app: string;
  workflow: string;
  key: string;
}

/**
 * One GCRA admission (rateLimit, throttle) under the row lock of an
 * upsert: concurrent events of a key queue on the row and each sees the
 * arrival time the previous one left. Times are the database's clock, so
 * replicas agree.
 *
 * `drop`: refuse (and leave the state alone) when over the tolerance;
 * otherwise always admit and say when the admission may start.
 *
 * @returns allowed, and `startAtMs` (epoch ms; <= nowMs when it may start at once)
 */
export async function gcraAdmit(
  tx: Database,
  g: GateScope & { kind: 'rate_limit' | 'throttle'; intervalMs: number; toleranceMs: number; drop: boolean },
): Promise<{ allowed: boolean; startAtMs: number; nowMs: number }> {
  const rows = await tx.query<{ tat_ms: string | number; now_ms: string | number }>(
    `with c as (select (extract(epoch from clock_timestamp()) * 1000)::bigint as now_ms)
     insert into ingest.gates as g (workspace_id, app, workflow, kind, key, tat_ms, now_ms)
     select $1, $2, $3, $4, $5, c.now_ms + $6::bigint, c.now_ms from c
     on conflict (workspace_id, app, workflow, kind, key) do update
       set tat_ms = greatest(g.tat_ms, excluded.now_ms) + $6::bigint, now_ms = excluded.now_ms
       where not $8::boolean or greatest(g.tat_ms, excluded.now_ms) - excluded.now_ms <= $7::bigint
     returning tat_ms, now_ms`,
    [g.workspaceId, g.app, g.workflow, g.kind, g.key, g.intervalMs, g.toleranceMs, g.drop],
  );
  const r = rows[0];
  if (!r) return { allowed: false, startAtMs: 0, nowMs: 0 };
  const tat = Number(r.tat_ms);
  const now = Number(r.now_ms);
  return { allowed: true, startAtMs: Math.max(now, tat - g.intervalMs - g.toleranceMs), nowMs: now };
}

/**
 * Claim an idempotency key for `runId` for 24 h. A concurrent claim of the
 * same key waits on the first and then finds it taken.
 * @returns true when this run holds the key
 */
export async function claimIdempotencyKey(tx: Database, s: GateScope, runId: string): Promise<boolean> {
  const rows = await tx.query(
    `insert into ingest.idempotency_keys as k (workspace_id, app, workflow, key, run_id, expires_at)
     values ($1, $2, $3, $4, $5, now() + interval '24 hours')
     on conflict (workspace_id, app, workflow, key) do update set run_id = excluded.run_id, expires_at = excluded.expires_at
       where k.expires_at <= now()
     returning run_id`,
    [s.workspaceId, s.app, s.workflow, s.key, runId],
  );
  return rows.length === 1;
}

/** Give a key back when the run it was claimed for does not start after all (a later gate stopped it). */
export async function releaseIdempotencyKey(tx: Database, s: GateScope, runId: string): Promise<void> {
  await tx.query('delete from ingest.idempotency_keys where workspace_id = $1 and app = $2 and workflow = $3 and key = $4 and run_id = $5', [
    s.workspaceId, s.app, s.workflow, s.key, runId,
  ]);
}

/** The run ingest last started for a singleton key ('' when none), read before the transaction. */
export async function singletonClaim(db: Database, s: GateScope): Promise<{ runId: string; claimedAt: Date } | undefined> {
  const rows = await db.query<{ run_id: string; claimed_at: Date | string }>(
    'select run_id, claimed_at from ingest.singletons where workspace_id = $1 and app = $2 and workflow = $3 and key = $4',
    [s.workspaceId, s.app, s.workflow, s.key],
  );
  const r = rows[0];
  return r && { runId: r.run_id, claimedAt: new Date(r.claimed_at) };
}

/** Lock the singleton row of a key (creating it) and read the run it holds: concurrent events of the key serialise here. */
export async function lockSingleton(tx: Database, s: GateScope): Promise<string> {
  await tx.query(
    `insert into ingest.singletons (workspace_id, app, workflow, key, run_id) values ($1, $2, $3, $4, '')
     on conflict do nothing`,
    [s.workspaceId, s.app, s.workflow, s.key],
  );
  const rows = await tx.query<{ run_id: string }>(
    'select run_id from ingest.singletons where workspace_id = $1 and app = $2 and workflow = $3 and key = $4 for update',
    [s.workspaceId, s.app, s.workflow, s.key],
  );
  return rows[0]?.run_id ?? '';
}

export async function setSingleton(tx: Database, s: GateScope, runId: string): Promise<void> {
  await tx.query('update ingest.singletons set run_id = $5, claimed_at = now() where workspace_id = $1 and app = $2 and workflow = $3 and key = $4', [
    s.workspaceId, s.app, s.workflow, s.key, runId,
  ]);
}

/** Forget state that no longer decides anything: expired idempotency keys, rate state fully drained. */
export async function pruneGates(db: Database): Promise<void> {
  await db.query(`delete from ingest.idempotency_keys where expires_at < now()`);
  await db.query(`delete from ingest.gates where tat_ms < (extract(epoch from now()) * 1000)::bigint - 3600000`);
}

/**
 * Take the transaction-scoped advisory locks of `names` in one global
 * order (by their 64-bit hash). Every transaction that admits events locks
 * the gate rows it will touch this way first, so two requests whose events
 * touch the same keys in opposite orders queue instead of deadlocking.
 */
export async function lockAll(tx: Database, names: string[]): Promise<void> {
  if (names.length === 0) return;
  await tx.query(
    `select count(pg_advisory_xact_lock(h)) from (select distinct hashtextextended(n, 0) as h from unnest($1::text[]) as n order by 1) s`,
    [names],
  );
}

/** The advisory lock name of one gate row. */
export const lockName = (kind: string, s: GateScope) => [kind, s.workspaceId, s.app, s.workflow, s.key].join('\u001f');

/** The advisory lock of an event's dedupe id (per app), held while it is checked and recorded. */
export const dedupeLock = (workspaceId: string, app: string | undefined, dedupeId: string) => ['dedupe', workspaceId, app ?? '', dedupeId].join('\u001f');
