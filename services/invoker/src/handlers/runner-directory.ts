import type { Database } from '@dws/db';
import { unseal } from '@dws/protocol';
import { liveRunners, type RunnerRow } from '../store/runners.js';
import { workspaceSigningKey } from '../store/workspaces.js';

/**
 * Read-through caches for the invoke hot path: live runners per app and
 * each workspace's signing key. Entries expire quickly (other replicas
 * register runners too) and are dropped at once on a local change.
 */
export class RunnerDirectory {
  private readonly runners = new Map<string, { at: number; rows: Promise<RunnerRow[]> }>();
  private readonly keys = new Map<string, string>();

  constructor(
    private readonly db: Database,
    private readonly sealKey: Buffer,
    private readonly ttlMs = 2000,
  ) {}

  live(workspaceId: string, app: string): Promise<RunnerRow[]> {
    const k = `${workspaceId}\u0000${app}`;
    const hit = this.runners.get(k);
    if (hit && Date.now() - hit.at < this.ttlMs) return hit.rows;
    const rows = liveRunners(this.db, workspaceId, app);
    this.runners.set(k, { at: Date.now(), rows });
    rows.catch(() => this.runners.delete(k));
    return rows;
  }

  forget(workspaceId: string, app: string): void {
    this.runners.delete(`${workspaceId}\u0000${app}`);
  }

  async signingKey(workspaceId: string): Promise<string | undefined> {
    const hit = this.keys.get(workspaceId);
    if (hit) return hit;
    const sealed = await workspaceSigningKey(this.db, workspaceId);
    if (!sealed) return undefined;
    const key = unseal(sealed, this.sealKey);
    this.keys.set(workspaceId, key);
    return key;
  }

  forgetKey(workspaceId: string): void {
    this.keys.delete(workspaceId);
  }
}
