import { randomUUID } from 'node:crypto';
import type { Database } from '@dws/db';
import { create, toBinary, WorkspaceUpsertedSchema } from '@dws/proto';
import { notFound, seal, unseal } from '@dws/protocol';
import { ids, subjects, type Outbox } from '@dws/runtime';
import { generateKey, generateSigningKey, type KeyKind } from '../domain/keys.js';
import { insertKey, insertWorkspace, revokeKey, updateWorkspace, workspaceById, type WorkspaceRow } from '../store/workspaces.js';
import type { Authenticator } from './auth.js';

const iso = (d: Date | string) => (d instanceof Date ? d : new Date(d)).toISOString();

/** The admin API's view of a workspace: never its signing key or key hashes. */
export function workspaceRecord(w: WorkspaceRow) {
  return { id: w.id, name: w.name, suspended: w.suspended, limits: w.limits ?? {}, createdAt: iso(w.created_at) };
}

/**
 * Write the WorkspaceUpserted fact into the outbox inside `tx`: the invoker
 * learns the signing key and suspension from it. Every change is a new fact
 * (its own msgId); the consumer upserts, so order within the stream wins.
 */
export async function announceWorkspace(tx: Database, outbox: Outbox, w: { id: string; name: string; signingKey: string; suspended: boolean }) {
  const fact = create(WorkspaceUpsertedSchema, { workspaceId: w.id, name: w.name, signingKey: w.signingKey, suspended: w.suspended });
  return outbox.enqueue(tx, [{ subject: subjects.workspaceUpserted, msgId: `ws-${w.id}-${randomUUID()}`, payload: toBinary(WorkspaceUpsertedSchema, fact) }]);
}

/** CONTRACT.md admin API: workspaces, their keys, suspension and limits. */
export class AdminApi {
  constructor(private readonly d: { db: Database; outbox: Outbox; sealKey: Buffer; auth: Authenticator }) {}

  async createWorkspace(name: string) {
    const id = ids.workspace();
    const signingKey = generateSigningKey();
    const keys = { secret: generateKey('secret'), public: generateKey('public'), console: generateKey('console') } satisfies Record<KeyKind, string>;
    const pending = await this.d.db.tx(async (tx) => {
      await insertWorkspace(tx, { id, name, signingKeySealed: seal(signingKey, this.d.sealKey) });
      for (const kind of ['secret', 'public', 'console'] as const) await insertKey(tx, { workspaceId: id, kind, name: kind, key: keys[kind] });
      return announceWorkspace(tx, this.d.outbox, { id, name, signingKey, suspended: false });
    });
    await this.d.outbox.afterCommit(pending);
    return { id, name, secretKey: keys.secret, publicKey: keys.public, consoleKey: keys.console, signingKey };
  }

  async getWorkspace(id: string) {
    const w = await workspaceById(this.d.db, id);
    if (!w) throw notFound('workspace');
    return workspaceRecord(w);
  }

  async patchWorkspace(id: string, patch: { suspended?: boolean; limits?: Record<string, number | null> }) {
    const { row, pending } = await this.d.db.tx(async (tx) => {
      const row = await updateWorkspace(tx, id, patch);
      if (!row) throw notFound('workspace');
      const pending = await announceWorkspace(tx, this.d.outbox, {
        id: row.id,
        name: row.name,
        signingKey: unseal(row.signing_key_sealed, this.d.sealKey),
        suspended: row.suspended,
      });
      return { row, pending };
    });
    await this.d.outbox.afterCommit(pending);
    // Suspension rides on the cached key records: drop them so this replica sees it at once.
    this.d.auth.invalidate();
    return workspaceRecord(row);
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
