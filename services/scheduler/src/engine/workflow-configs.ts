import type { Database } from '@dws/db';

/** The parts of a workflow definition the engine reads. */
export interface WorkflowConfig {
  /** SPEC Limits: default 1 (no retries). */
  maxAttempts: number;
  onFailure: boolean;
}

const DEFAULT: WorkflowConfig = { maxAttempts: 1, onFailure: false };

/** Parse the registered workflow object (as the runner sent it) into what the engine uses. */
export function toWorkflowConfig(raw: unknown): WorkflowConfig {
  const cfg = (raw ?? {}) as { retry?: { maxAttempts?: unknown }; onFailure?: unknown };
  const max = cfg.retry?.maxAttempts;
  return {
    maxAttempts: typeof max === 'number' && Number.isInteger(max) && max >= 1 ? Math.min(max, 100) : 1,
    onFailure: cfg.onFailure === true,
  };
}

/**
 * The scheduler's projection of registered workflows, read through a small
 * cache (the engine asks on every pass).
 */
export class WorkflowConfigs {
  private readonly cache = new Map<string, { at: number; cfg: Promise<WorkflowConfig> }>();

  constructor(
    private readonly db: Database,
    private readonly ttlMs = 5000,
  ) {}

  get(workspaceId: string, app: string, name: string): Promise<WorkflowConfig> {
    const k = `${workspaceId}\u0000${app}\u0000${name}`;
    const hit = this.cache.get(k);
    if (hit && Date.now() - hit.at < this.ttlMs) return hit.cfg;
    const cfg = this.db
      .query<{ config: unknown }>('select config from scheduler.workflows where workspace_id = $1 and app = $2 and name = $3', [workspaceId, app, name])
      .then((rows) => (rows[0] ? toWorkflowConfig(rows[0].config) : DEFAULT));
    this.cache.set(k, { at: Date.now(), cfg });
    cfg.catch(() => this.cache.delete(k));
    return cfg;
  }

  /** Store what the invoker announced; the projection is replaced per workflow. */
  async save(workspaceId: string, app: string, defs: { name: string; configJson: string }[]): Promise<void> {
    if (defs.length === 0) return;
    await this.db.query(
      `insert into scheduler.workflows (workspace_id, app, name, config, updated_at)
       select $1, $2, w.name, w.config, now() from jsonb_to_recordset($3::jsonb) as w(name text, config jsonb)
       on conflict (workspace_id, app, name) do update set config = excluded.config, updated_at = now()`,
      [workspaceId, app, `[${defs.map((d) => `{"name":${JSON.stringify(d.name)},"config":${d.configJson}}`).join(',')}]`],
    );
    for (const d of defs) this.cache.delete(`${workspaceId}\u0000${app}\u0000${d.name}`);
  }
}
