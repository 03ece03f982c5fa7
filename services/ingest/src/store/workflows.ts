import type { Database } from '@dws/db';
import { nextCronTick, parseWorkflowPolicy, type CronSpec, type WorkflowPolicy } from '@dws/cel';

/** A registered workflow object as the runner sent it (raw JSON text). */
export interface RegisteredWorkflow {
  name: string;
  configJson: string;
}

/**
 * Apply a registration (WorkflowsRegistered) and its cron schedules. With a
 * version (> 0) the defs are the app's whole declared set: applied only over
 * an older version (the fact arrives twice, as the invoker's request and
 * from the stream, in either order), and the app's other workflows are
 * dropped. Version 0 (older publishers) upserts the named workflows only. A
 * schedule that is kept keeps its next tick (re-registering every 30 s must
 * not move it); a new one starts at its first tick after now; a removed one
 * is deleted. Returns whether anything was applied.
 */
export async function saveRegistration(
  db: Database,
  workspaceId: string,
  app: string,
  defs: RegisteredWorkflow[],
  version = 0,
  now = new Date(),
): Promise<boolean> {
  if (defs.length === 0 && version === 0) return false;
  const crons: (CronSpec & { workflow: string; nextAt: string })[] = [];
  for (const d of defs) {
    const { policy } = parseWorkflowPolicy(JSON.parse(d.configJson) as Record<string, unknown>);
    for (const c of policy.crons) {
      const next = nextCronTick(c, now);
      if (next) crons.push({ ...c, workflow: d.name, nextAt: next.toISOString() });
    }
  }
  const names = defs.map((d) => d.name);
  return db.tx(async (tx) => {
    if (version > 0) {
      const newer = await tx.query(
        `insert into ingest.app_versions (workspace_id, app, version) values ($1, $2, $3)
         on conflict (workspace_id, app) do update set version = excluded.version where app_versions.version < excluded.version
         returning version`,
        [workspaceId, app, version],
      );
      if (newer.length === 0) return false;
      await tx.query('delete from ingest.workflows where workspace_id = $1 and app = $2 and not (name = any($3::text[]))', [workspaceId, app, names]);
    }
    if (defs.length > 0) {
      await tx.query(
        `insert into ingest.workflows (workspace_id, app, name, config, updated_at)
         select $1, $2, w.name, w.config, now() from jsonb_to_recordset($3::jsonb) as w(name text, config jsonb)
         on conflict (workspace_id, app, name) do update set config = excluded.config, updated_at = now()`,
        [workspaceId, app, `[${defs.map((d) => `{"name":${JSON.stringify(d.name)},"config":${d.configJson}}`).join(',')}]`],
      );
    }
    // A versioned set owns all of the app's schedules; an unversioned one only its named workflows'.
    await tx.query(
      `delete from ingest.cron_schedules s where s.workspace_id = $1 and s.app = $2 and ($3::text[] is null or s.workflow = any($3::text[]))
          and not exists (select 1 from jsonb_to_recordset($4::jsonb) as c(workflow text, cron text) where c.workflow = s.workflow and c.cron = s.cron)`,
      [workspaceId, app, version > 0 ? null : names, JSON.stringify(crons.map((c) => ({ workflow: c.workflow, cron: c.cron })))],
    );
    if (crons.length > 0) {
      await tx.query(
        `insert into ingest.cron_schedules (workspace_id, app, workflow, cron, pattern, tz, next_at)
         select $1, $2, c.workflow, c.cron, c.pattern, c.tz, c.next_at
           from jsonb_to_recordset($3::jsonb) as c(workflow text, cron text, pattern text, tz text, next_at timestamptz)
         on conflict (workspace_id, app, workflow, cron) do nothing`,
        [workspaceId, app, JSON.stringify(crons.map((c) => ({ workflow: c.workflow, cron: c.cron, pattern: c.pattern, tz: c.tz, next_at: c.nextAt })))],
      );
    }
    await bumpIndexVersion(tx, workspaceId);
    return true;
  });
}

/** Inside a transaction that changed what the workspace's index holds. */
async function bumpIndexVersion(tx: Database, workspaceId: string): Promise<void> {
  await tx.query(
    `insert into ingest.index_versions (workspace_id, version) values ($1, 1)
     on conflict (workspace_id) do update set version = index_versions.version + 1`,
    [workspaceId],
  );
}

/** The version of a workspace's index as committed now (0 before any registration). */
export async function indexVersionOf(db: Database, workspaceId: string): Promise<number> {
  const rows = await db.query<{ version: string | number }>('select version from ingest.index_versions where workspace_id = $1', [workspaceId]);
  return Number(rows[0]?.version ?? 0);
}

export interface WorkflowRow {
  app: string;
  name: string;
  config: Record<string, unknown>;
}

/** One workflow's policy, read inside a transaction (the timers' path; events read the cached index). */
export async function policyOf(tx: Database, workspaceId: string, app: string, name: string): Promise<WorkflowPolicy | undefined> {
  const rows = await tx.query<{ config: unknown }>('select config from ingest.workflows where workspace_id = $1 and app = $2 and name = $3', [workspaceId, app, name]);
  const c = rows[0]?.config;
  return typeof c === 'object' && c !== null && !Array.isArray(c) ? parseWorkflowPolicy(c as Record<string, unknown>).policy : undefined;
}

export function workflowsOfWorkspace(db: Database, workspaceId: string): Promise<WorkflowRow[]> {
  return db.query<WorkflowRow>('select app, name, config from ingest.workflows where workspace_id = $1', [workspaceId]);
}

/** WorkspaceUpserted: the suspension flag. */
export async function saveWorkspace(db: Database, id: string, suspended: boolean): Promise<void> {
  await db.tx(async (tx) => {
    await tx.query(
      `insert into ingest.workspaces (id, suspended, updated_at) values ($1, $2, now())
       on conflict (id) do update set suspended = excluded.suspended, updated_at = now()`,
      [id, suspended],
    );
    await bumpIndexVersion(tx, id);
  });
}

export async function isSuspended(db: Database, id: string): Promise<boolean> {
  const rows = await db.query<{ suspended: boolean }>('select suspended from ingest.workspaces where id = $1', [id]);
  return rows[0]?.suspended ?? false;
}
