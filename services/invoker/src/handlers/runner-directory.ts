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
  private readonly keyWaits = new Map<string, Promise<string | undefined>>();

  constructor(
    private readonly db: Database,
    private readonly sealKey: Buffer,
    private readonly ttlMs = 2000,
    /** How long a pass waits for a key the gateway's WorkspaceUpserted has not brought yet. */
    private readonly keyWaitMs = 5000,
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

  /**
   * The key, waiting for it when it is not here yet: on a fresh fleet the
   * first passes can come before the invoker has consumed the gateway's
   * WorkspaceUpserted (seconds under load), and a pass that waits a moment
   * beats one failed as a transport error and retried after a backoff. One
   * wait per workspace, shared by the passes that come meanwhile; undefined
   * when the key has not come within keyWaitMs.
   */
  signingKeyAwaited(workspaceId: string): Promise<string | undefined> {
    const hit = this.keys.get(workspaceId);
    if (hit) return Promise.resolve(hit);
    let wait = this.keyWaits.get(workspaceId);
    if (!wait) {
      wait = this.pollKey(workspaceId).finally(() => this.keyWaits.delete(workspaceId));
      this.keyWaits.set(workspaceId, wait);
    }
    return wait;
  }

  private async pollKey(workspaceId: string): Promise<string | undefined> {
    const deadline = Date.now() + this.keyWaitMs;
    // Another replica may be the one consuming the fact: read the table, not a local signal.
    for (let pause = 20; ; pause = Math.min(pause * 2, 200)) {
      const key = await this.signingKey(workspaceId);
      const left = deadline - Date.now();
      if (key || left <= 0) return key;
      await new Promise((r) => setTimeout(r, Math.min(pause, left)));
    }
  }

  forgetKey(workspaceId: string): void {
    this.keys.delete(workspaceId);
  }
}
