import type { Database } from '@dws/db';
import { notFound, seal } from '@dws/protocol';
import { DEFAULT_RETENTION_DAYS, ids, type Outbox } from '@dws/runtime';
import { generateKey, generateSigningKey, type KeyKind } from '../domain/keys.js';
import { monthOf, type Usage } from '../domain/usage.js';
import { usageOf } from '../store/usage.js';
import { insertKey, insertWorkspace, lockWorkspace, revokeKey, workspaceById, type WorkspaceRow } from '../store/workspaces.js';
import type { Authenticator } from './auth.js';
import { providersView } from '../domain/providers.js';
import { announceWorkspace, providersOf, settleWorkspace, type WorkspaceChange } from './workspace-state.js';

const iso = (d: Date | string) => (d instanceof Date ? d : new Date(d)).toISOString();

/** The admin API's view of a workspace: never its signing key, key hashes or provider keys. `usage` is the current UTC month's. */
export function workspaceRecord(w: WorkspaceRow, usage: Usage, sealKey: Buffer) {
  return {
    id: w.id,
    name: w.name,
    suspended: w.suspended,
    suspendedReason: w.suspended ? (w.suspended_reason ?? 'operator') : null,
    limits: w.limits ?? {},
    providers: providersView(providersOf(w, sealKey)),
    retentionDays: w.retention_days ?? DEFAULT_RETENTION_DAYS,
    usage,
    createdAt: iso(w.created_at),
  };
}

/** CONTRACT.md admin API: workspaces, their keys, suspension and limits. */
export class AdminApi {
  constructor(private readonly d: { db: Database; outbox: Outbox; sealKey: Buffer; auth: Authenticator; now: () => number }) {}

  async createWorkspace(name: string) {
    const id = ids.workspace();
    const signingKey = generateSigningKey();
    const keys = { secret: generateKey('secret'), public: generateKey('public'), console: generateKey('console') } satisfies Record<KeyKind, string>;
    const pending = await this.d.db.tx(async (tx) => {
      await insertWorkspace(tx, { id, name, signingKeySealed: seal(signingKey, this.d.sealKey) });
      for (const kind of ['secret', 'public', 'console'] as const) await insertKey(tx, { workspaceId: id, kind, name: kind, key: keys[kind] });
      return announceWorkspace(tx, this.d.outbox, { id, name, signingKey, suspended: false, providers: {}, retentionDays: null, limits: {} });
    });
    await this.d.outbox.afterCommit(pending);
    return { id, name, secretKey: keys.secret, publicKey: keys.public, consoleKey: keys.console, signingKey };
  }

  async getWorkspace(id: string) {
    const w = await workspaceById(this.d.db, id);
    if (!w) throw notFound('workspace');
    const month = monthOf(this.d.now());
    return workspaceRecord(w, await usageOf(this.d.db, id, month), this.d.sealKey);
  }

  /**
   * Operator suspension and limits, settled against this month's usage in the
   * same transaction: lowering a limit to or below the usage suspends at once,
   * raising or removing it lifts a usage suspension (never an operator's).
   * Providers are merged and announced to the invoker with the rest; the
   * retention window (null: back to the default) to every service that
   * keeps history.
   */
  async patchWorkspace(id: string, patch: WorkspaceChange) {
    const month = monthOf(this.d.now());
    const settled = await this.d.db.tx(async (tx) => {
      const row = await lockWorkspace(tx, id);
      if (!row) throw notFound('workspace');
      return settleWorkspace(tx, this.d, row, month, patch);
    });
    if (settled.pending) await this.d.outbox.afterCommit(settled.pending);
    // Suspension rides on the cached key records: drop them so this replica sees it at once.
    this.d.auth.invalidate();
    return workspaceRecord(settled.row, settled.usage, this.d.sealKey);
  }

  async createKey(workspaceId: string, kind: KeyKind, name: string) {
    if (!(await workspaceById(this.d.db, workspaceId))) throw notFound('workspace');
    const key = generateKey(kind);
    const id = await insertKey(this.d.db, { workspaceId, kind, name, key });
    return { id, kind, name, key };
  }

  async revokeKey(workspaceId: string, keyId: string) {
    if (!(await revokeKey(this.d.db, workspaceId, keyId))) throw notFound('key');
    this.d.auth.invalidate();
  }
}
