import type { Config } from '@dws/config';
import type { Database } from '@dws/db';
import { seal, unseal } from '@dws/protocol';
import { generateKey, generateSigningKey, type KeyKind } from './keys.js';
import { insertKey, insertWorkspace, sealedDevKeys, setSigningKey, workspaceById } from '../store/workspaces.js';

export const DEFAULT_WORKSPACE_ID = 'ws_default';

export interface DevCredentials {
  workspaceId: string;
  secretKey: { value: string; from: 'env' | 'generated' };
  publicKey: { value: string; from: 'env' | 'generated' };
  signingKey: { value: string; from: 'env' | 'generated' };
}

/**
 * Make sure workspace `default` exists with the keys CONTRACT.md promises:
 * keys given in the environment are stored (hashed) and accepted from then
 * on; absent ones are generated once, kept sealed, and printed at each
 * start. Serialised by an advisory lock so replicas can start together.
 */
export async function ensureDefaultWorkspace(db: Database, cfg: Config, sealKey: Buffer): Promise<DevCredentials> {
  return db.tx(async (tx) => {
    await tx.query(`select pg_advisory_xact_lock(hashtext('dws-gateway-bootstrap'))`);
    const ws = await workspaceById(tx, DEFAULT_WORKSPACE_ID);
    let signing: DevCredentials['signingKey'];
    if (cfg.SERVICE_SIGNING_KEY) {
      signing = { value: cfg.SERVICE_SIGNING_KEY, from: 'env' };
      if (!ws) await insertWorkspace(tx, { id: DEFAULT_WORKSPACE_ID, name: 'default', signingKeySealed: seal(signing.value, sealKey) });
      else if (unseal(ws.signing_key_sealed, sealKey) !== signing.value) await setSigningKey(tx, DEFAULT_WORKSPACE_ID, seal(signing.value, sealKey));
    } else if (ws) {
      signing = { value: unseal(ws.signing_key_sealed, sealKey), from: 'generated' };
    } else {
      signing = { value: generateSigningKey(), from: 'generated' };
      await insertWorkspace(tx, { id: DEFAULT_WORKSPACE_ID, name: 'default', signingKeySealed: seal(signing.value, sealKey) });
    }
    const stored = await sealedDevKeys(tx, DEFAULT_WORKSPACE_ID);
    const devKey = async (kind: KeyKind, fromEnv: string | undefined): Promise<DevCredentials['secretKey']> => {
      if (fromEnv) {
        await insertKey(tx, { workspaceId: DEFAULT_WORKSPACE_ID, kind, name: `dev-${kind}`, key: fromEnv });
        return { value: fromEnv, from: 'env' };
      }
      const existing = stored.find((s) => s.kind === kind);
      if (existing) return { value: unseal(existing.sealed, sealKey), from: 'generated' };
      const value = generateKey(kind);
      await insertKey(tx, { workspaceId: DEFAULT_WORKSPACE_ID, kind, name: `dev-${kind}`, key: value, sealed: seal(value, sealKey) });
      return { value, from: 'generated' };
    };
    return {
      workspaceId: DEFAULT_WORKSPACE_ID,
      secretKey: await devKey('secret', cfg.SERVICE_DEV_SECRET_KEY),
      publicKey: await devKey('public', cfg.SERVICE_DEV_PUBLIC_KEY),
      signingKey: signing,
    };
  });
}
