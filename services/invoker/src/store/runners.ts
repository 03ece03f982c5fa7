import { createHash } from 'node:crypto';
import type { Database } from '@dws/db';
import type { Registration } from '../domain/registration.js';

/** SPEC Limits: a runner is live for 90 s after its last heartbeat. */
export const LIVENESS_TTL_MS = 90_000;

export type Transport = 'serve' | 'connect';

export interface RunnerRow {
  id: string;
  app: string;
  url: string;
  transport: string;
  workflows: string[];
  lastSeenMs: number;
  runtime: string | null;
  version: string | null;
  keyFingerprint: string | null;
  /** Connect runners: the replica holding the socket. */
  replica: string | null;
  connectionId: string | null;
}

/** Where a connect runner's socket lives. */
export interface SocketHold {
  replica: string;
  connectionId: string;
}

/**
 * Upsert the runner and its workflow definitions in one transaction. A
 * connect registration also records which replica holds the socket; a serve
 * registration clears it (the runner switched transports).
 */
export async function saveRegistration(
  tx: Database,
  workspaceId: string,
  reg: Registration,
  transport: Transport,
  hold?: SocketHold,
): Promise<void> {
  await tx.query(
    `insert into invoker.runners (workspace_id, id, app, url, transport, runtime, language, version, key_fingerprint, workflows,
                                  replica, connection_id, last_seen)
     values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::text[], $11, $12, now())
     on conflict (workspace_id, id) do update set app = excluded.app, url = excluded.url, transport = excluded.transport,
       runtime = excluded.runtime, language = excluded.language, version = excluded.version,
       key_fingerprint = excluded.key_fingerprint, workflows = excluded.workflows,
       replica = excluded.replica, connection_id = excluded.connection_id, last_seen = now()`,
    [
      workspaceId,
      reg.runnerId,
      reg.app,
      reg.url,
      transport,
      reg.runtime,
      reg.language,
      reg.version,
      reg.keyFingerprint,
      reg.workflows.map((w) => w.name),
      hold?.replica ?? null,
      hold?.connectionId ?? null,
    ],
  );
  if (reg.workflows.length === 0) return;
  await tx.query(
    `insert into invoker.workflows (workspace_id, app, name, config, updated_at)
     select $1, $2, w.name, w.config, now() from jsonb_to_recordset($3::jsonb) as w(name text, config jsonb)
     on conflict (workspace_id, app, name) do update set config = excluded.config, updated_at = now()`,
    [workspaceId, reg.app, JSON.stringify(reg.workflows.map((w) => ({ name: w.name, config: w.config })))],
  );
}

/**
 * Runners of an app that may take an invoke: seen within the liveness TTL,
 * and for connect runners, with a socket held by some replica.
 */
export async function liveRunners(db: Database, workspaceId: string, app: string): Promise<RunnerRow[]> {
  const rows = await db.query<{
    id: string;
    app: string;
    url: string;
    transport: string;
    workflows: string[];
    last_seen_ms: string | number;
    runtime: string | null;
    version: string | null;
    key_fingerprint: string | null;
    replica: string | null;
    connection_id: string | null;
  }>(
    `select id, app, url, transport, workflows, (extract(epoch from last_seen) * 1000)::bigint as last_seen_ms,
            runtime, version, key_fingerprint, replica, connection_id
       from invoker.runners
      where workspace_id = $1 and app = $2 and last_seen > now() - ($3::int * interval '1 millisecond')
        and (transport = 'serve' or replica is not null)`,
    [workspaceId, app, LIVENESS_TTL_MS],
  );
  return rows.map((r) => ({
    id: r.id,
    app: r.app,
    url: r.url,
    transport: r.transport,
    workflows: r.workflows,
    lastSeenMs: Number(r.last_seen_ms),
    runtime: r.runtime,
    version: r.version,
    keyFingerprint: r.key_fingerprint,
    replica: r.replica,
    connectionId: r.connection_id,
  }));
}

/** The socket closed: out of routing at once, unless a newer socket already registered the runner. */
export async function detachSocket(db: Database, workspaceId: string, runnerId: string, connectionId: string): Promise<void> {
  await db.query(
    `update invoker.runners set replica = null where workspace_id = $1 and id = $2 and connection_id = $3 and replica is not null`,
    [workspaceId, runnerId, connectionId],
  );
}

/** A replica is gone (it answers nobody): every socket it held is dead. */
export async function detachReplica(db: Database, replica: string): Promise<number> {
  const rows = await db.query<{ id: string }>(`update invoker.runners set replica = null where replica = $1 returning id`, [replica]);
  return rows.length;
}

/** The heartbeat of a replica's live sockets: keeps their runners live (SPEC: 90 s TTL since the last heartbeat). */
export async function touchSockets(db: Database, replica: string, connectionIds: string[]): Promise<void> {
  if (connectionIds.length === 0) return;
  await db.query(
    `update invoker.runners set last_seen = now()
      where replica = $1 and connection_id in (select jsonb_array_elements_text($2::jsonb))`,
    [replica, JSON.stringify(connectionIds)],
  );
}

export async function listRunners(db: Database, workspaceId: string, app: string | undefined) {
  return db.query<{
    id: string;
    app: string;
    url: string;
    transport: string;
    runtime: string | null;
    language: string | null;
    version: string | null;
    key_fingerprint: string | null;
    workflows: string[];
    replica: string | null;
    last_seen: Date | string;
    registered_at: Date | string;
  }>(
    `select id, app, url, transport, runtime, language, version, key_fingerprint, workflows, replica, last_seen, registered_at
       from invoker.runners where workspace_id = $1 and ($2::text is null or app = $2) order by app, id`,
    [workspaceId, app ?? null],
  );
}

export interface WorkflowRow {
  app: string;
  name: string;
  config: Record<string, unknown>;
  updated_at: Date | string;
  paused_at: Date | string | null;
  paused_by: string | null;
  hold: boolean | null;
}

export async function listWorkflows(db: Database, workspaceId: string, app: string | undefined, name?: string): Promise<WorkflowRow[]> {
  return db.query<WorkflowRow>(
    `select w.app, w.name, w.config, w.updated_at, p.paused_at, p.paused_by, p.hold from invoker.workflows w
       left join invoker.workflow_pauses p on p.workspace_id = w.workspace_id and p.app = w.app and p.workflow = w.name
      where w.workspace_id = $1 and ($2::text is null or w.app = $2) and ($3::text is null or w.name = $3) order by w.app, w.name`,
    [workspaceId, app ?? null, name ?? null],
  );
}

/**
 * Pause a workflow (`by`: who; `hold`: its events are kept for its resume
 * rather than skipped), or resume it (`pause` undefined); a workflow paused
 * already keeps its time and author, and takes the new `hold`. Inside the
 * transaction that then declares the app's workflows again (the pause is
 * part of what it declares).
 */
export async function setWorkflowPaused(
  tx: Database,
  workspaceId: string,
  app: string,
  workflow: string,
  pause: { by: string; hold: boolean } | undefined,
): Promise<void> {
  if (pause === undefined) {
    await tx.query('delete from invoker.workflow_pauses where workspace_id = $1 and app = $2 and workflow = $3', [workspaceId, app, workflow]);
  } else {
    await tx.query(
      `insert into invoker.workflow_pauses (workspace_id, app, workflow, paused_by, hold) values ($1, $2, $3, $4, $5)
       on conflict (workspace_id, app, workflow) do update set hold = excluded.hold`,
      [workspaceId, app, workflow, pause.by, pause.hold],
    );
  }
}

/** An app's declared workflow set as of one registration. */
export interface AppWorkflows {
  version: number;
  /** false when the set (names and configs) is what the last version already said. */
  changed: boolean;
  workflows: { name: string; configJson: string }[];
}

/**
 * Inside the registering transaction, after the runner row is saved: the
 * app's workflows are those some runner of the app declares (a runner that
 * stopped declaring one takes it out, unless another still does). Locks the
 * app's version row first, so concurrent registrations of one app are
 * ordered and each reads the set the previous one committed; the version
 * grows only when the set changed.
 */
export async function declareAppWorkflows(tx: Database, workspaceId: string, app: string): Promise<AppWorkflows> {
  await tx.query(
    `insert into invoker.app_registrations (workspace_id, app, version, digest) values ($1, $2, 0, '')
     on conflict (workspace_id, app) do nothing`,
    [workspaceId, app],
  );
  const [current] = await tx.query<{ version: string | number; digest: string }>(
    'select version, digest from invoker.app_registrations where workspace_id = $1 and app = $2 for update',
    [workspaceId, app],
  );
  await tx.query(
    `delete from invoker.workflows w where w.workspace_id = $1 and w.app = $2
        and not exists (select 1 from invoker.runners r where r.workspace_id = $1 and r.app = $2 and w.name = any(r.workflows))`,
    [workspaceId, app],
  );
  // An operator's pause rides in the config as `paused` (a runner cannot set it: its own is dropped).
  const rows = await tx.query<{ name: string; config: string }>(
    `select w.name,
            (case when p.workflow is null then w.config - 'paused'
                  else w.config || jsonb_build_object('paused', jsonb_build_object('at', p.paused_at, 'by', p.paused_by)
                                                                  || case when p.hold then '{"hold":true}'::jsonb else '{}'::jsonb end) end)::text as config
       from invoker.workflows w
       left join invoker.workflow_pauses p on p.workspace_id = w.workspace_id and p.app = w.app and p.workflow = w.name
      where w.workspace_id = $1 and w.app = $2 order by w.name`,
    [workspaceId, app],
  );
  const digest = createHash('sha256')
    .update(JSON.stringify(rows.map((r) => [r.name, r.config])))
    .digest('hex');
  let version = Number(current?.version ?? 0);
  const changed = digest !== current?.digest;
  if (changed) {
    version += 1;
    await tx.query('update invoker.app_registrations set version = $3, digest = $4 where workspace_id = $1 and app = $2', [
      workspaceId,
      app,
      version,
      digest,
    ]);
  }
  return { version, changed, workflows: rows.map((r) => ({ name: r.name, configJson: r.config })) };
}
