import type { Database } from '@dws/db';
import { runTimeouts } from '@dws/cel';
import { toAiSpendCeilings, toMaxAttempts, toRetryBackoff, type AiSpendCeilings, type RetryBackoff } from '@dws/protocol';

/** The parts of a workflow definition the engine reads. */
export interface WorkflowConfig {
  /** SPEC Limits: default 1 (no retries). */
  maxAttempts: number;
  /** The wait between a step's attempts. */
  retryBackoff: RetryBackoff;
  onFailure: boolean;
  /** AI spend ceilings; undefined when none is set. */
  aiSpend?: AiSpendCeilings;
}

const DEFAULT: WorkflowConfig = { maxAttempts: 1, retryBackoff: toRetryBackoff(undefined), onFailure: false };

/** Parse the registered workflow object (as the runner sent it) into what the engine uses. */
export function toWorkflowConfig(raw: unknown): WorkflowConfig {
  const cfg = (raw ?? {}) as { retry?: unknown; onFailure?: unknown; aiSpend?: unknown };
  const aiSpend = toAiSpendCeilings(cfg.aiSpend);
  return {
    maxAttempts: toMaxAttempts(cfg.retry),
    retryBackoff: toRetryBackoff(cfg.retry),
    onFailure: cfg.onFailure === true,
    ...(aiSpend ? { aiSpend } : {}),
  };
}

/**
 * The scheduler's projection of registered workflows. Read without a cache,
 * and only when a pass needs it (a step failed, or the run failed: see the
 * engine), so a registration the invoker has answered is what the next
 * failure on any replica reads.
 */
export class WorkflowConfigs {
  constructor(private readonly db: Database) {}

  async get(workspaceId: string, app: string, name: string): Promise<WorkflowConfig> {
    const rows = await this.db.query<{ config: unknown }>('select config from scheduler.workflows where workspace_id = $1 and app = $2 and name = $3', [
      workspaceId,
      app,
      name,
    ]);
    return rows[0] ? toWorkflowConfig(rows[0].config) : DEFAULT;
  }

  /**
   * Store what the invoker announced. With a version (> 0) the defs are the
   * app's whole set, applied only over an older version, and the app's other
   * workflows are dropped; version 0 (older publishers) upserts the named ones.
   */
  async save(workspaceId: string, app: string, defs: { name: string; configJson: string }[], version = 0): Promise<void> {
    if (defs.length === 0 && version === 0) return;
    await this.db.tx(async (tx) => {
      if (version > 0) {
        const newer = await tx.query(
          `insert into scheduler.app_versions (workspace_id, app, version) values ($1, $2, $3)
           on conflict (workspace_id, app) do update set version = excluded.version where app_versions.version < excluded.version
           returning version`,
          [workspaceId, app, version],
        );
        if (newer.length === 0) return;
        await tx.query('delete from scheduler.workflows where workspace_id = $1 and app = $2 and not (name = any($3::text[]))', [
          workspaceId,
          app,
          defs.map((d) => d.name),
        ]);
      }
      if (defs.length === 0) return;
      await tx.query(
        `insert into scheduler.workflows (workspace_id, app, name, config, timeout_start_ms, timeout_finish_ms, updated_at)
         select $1, $2, w.name, w.config, w.start_ms, w.finish_ms, now() from jsonb_to_recordset($3::jsonb) as w(name text, config jsonb, start_ms bigint, finish_ms bigint)
         on conflict (workspace_id, app, name) do update
           set config = excluded.config, timeout_start_ms = excluded.timeout_start_ms, timeout_finish_ms = excluded.timeout_finish_ms, updated_at = now()`,
        [workspaceId, app, `[${defs.map((d) => `{"name":${JSON.stringify(d.name)},"config":${d.configJson},${timeoutsJson(d.configJson)}}`).join(',')}]`],
      );
    });
  }
}

/** The config's `timeouts` as the recordset's start_ms and finish_ms (null: none), kept beside it for the runs the scheduler starts. */
function timeoutsJson(configJson: string): string {
  let t: ReturnType<typeof runTimeouts>;
  try {
    t = runTimeouts((JSON.parse(configJson) as { timeouts?: unknown } | null)?.timeouts);
  } catch {
    t = undefined;
  }
  return `"start_ms":${t?.startMs ?? null},"finish_ms":${t?.finishMs ?? null}`;
}
