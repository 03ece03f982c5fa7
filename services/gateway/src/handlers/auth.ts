import { createHash, timingSafeEqual } from 'node:crypto';
import type { Bus, Subscription } from '@dws/bus';
import type { Database } from '@dws/db';
import type { IdentifiedRequest } from '@dws/http';
import { forbidden, ServiceError, unauthorized } from '@dws/protocol';
import { subjects, type Caller } from '@dws/runtime';
import { hashKey, mayWrite } from '../domain/keys.js';
import { DEFAULT_WORKSPACE_ID } from '../domain/bootstrap.js';
import { keyByHash, type KeyRecord } from '../store/workspaces.js';

export interface AuthedCaller extends Caller {
  suspended: boolean;
}

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;
const sha = (v: string) => createHash('sha256').update(v).digest();

/**
 * Bearer-key authentication with a short-lived cache (every request pays
 * it). CONTRACT: a missing or unknown key is 401, a public key on a write
 * 403. The actor is the key's name, or X-Service-Actor on a console key
 * (SPEC Authentication 3: key scope alone does not grant naming a person).
 */
export class Authenticator {
  private readonly cache = new Map<string, { at: number; rec: Promise<KeyRecord | undefined> }>();
  private readonly adminHash: Buffer | undefined;

  constructor(
    private readonly db: Database,
    private readonly opts: { enabled: boolean; adminToken?: string; ttlMs?: number; bus: Bus },
  ) {
    this.adminHash = opts.adminToken ? sha(opts.adminToken) : undefined;
  }

  async caller(req: IdentifiedRequest, opts: { write: boolean }): Promise<AuthedCaller> {
    const requestId = req.requestId ?? '';
    // W3C trace context: forwarded as is to the owning service, which continues it when it is valid.
    const tp = req.headers.traceparent;
    const trace = typeof tp === 'string' && tp.length <= 256 ? { traceparent: tp } : {};
    const key = this.bearer(req);
    if (!this.opts.enabled) {
      // SERVICE_AUTH=off: no key needed. A valid key still picks its workspace, so admin-made workspaces stay reachable.
      // SPEC Authentication 4: with authentication disabled the channel is `unrecorded`.
      const rec = key ? await this.lookup(key) : undefined;
      return {
        workspaceId: rec?.workspaceId ?? DEFAULT_WORKSPACE_ID,
        actor: rec?.name ?? 'anonymous',
        keyKind: 'none',
        requestId,
        suspended: rec?.suspended ?? false,
        via: 'unrecorded',
        ...trace,
      };
    }
    if (!key) throw unauthorized('An API key is required: authorization: Bearer <key>.');
    const rec = await this.lookup(key);
    if (!rec) throw unauthorized('The API key is not valid.');
    const named = req.headers['x-service-actor'];
    const person = rec.kind === 'console' && typeof named === 'string' && named.trim() !== '' ? named.trim().slice(0, 256) : undefined;
    // SPEC Approval decidedVia: `console` only when a console key names the acting person; any other key is `api`.
    const caller: AuthedCaller = {
      workspaceId: rec.workspaceId,
      actor: person ?? rec.name,
      keyKind: rec.kind,
      requestId,
      suspended: rec.suspended,
      via: person ? 'console' : 'api',
      ...trace,
    };
    this.authorize(caller, opts);
    return caller;
  }

  /**
   * CONTRACT Keys: a public key only reads (403 on a write). Also the check of
   * each MCP write tool, whose caller authenticated once for the request.
   * With authentication off (keyKind `none`) everything is allowed.
   */
  authorize(caller: Caller, opts: { write: boolean }): void {
    if (opts.write && caller.keyKind !== 'none' && !mayWrite(caller.keyKind)) {
      throw forbidden('key_read_only', 'A public key can only read; this call needs a secret key.');
    }
  }

  /** The admin API: off (404) without SERVICE_ADMIN_TOKEN, else the token compared in constant time. */
  admin(req: IdentifiedRequest): void {
    if (!this.adminHash) throw new ServiceError(404, 'route_not_found', 'The admin API is off (SERVICE_ADMIN_TOKEN is not set).');
    const token = this.bearer(req);
    if (!token || !timingSafeEqual(sha(token), this.adminHash)) throw unauthorized('The admin token is not valid.');
  }

  /**
   * Forget cached keys after a change (suspension, revocation), here and, over
   * the bus, on every other replica; the TTL bounds a lost notice.
   */
  invalidate(): void {
    this.cache.clear();
    this.opts.bus.emit(subjects.gatewayKeysChanged, new Uint8Array(0));
  }

  /** Drop cached keys whenever any replica changed some. */
  follow(): Subscription {
    return this.opts.bus.subscribe(subjects.gatewayKeysChanged, () => this.cache.clear());
  }

  private bearer(req: IdentifiedRequest): string | undefined {
    const header = req.headers.authorization;
    const m = typeof header === 'string' ? BEARER.exec(header) : null;
    return m ? m[1] : undefined;
  }

  private lookup(key: string): Promise<KeyRecord | undefined> {
    if (key.length > 512) return Promise.resolve(undefined);
    const hash = hashKey(key);
    const hit = this.cache.get(hash);
    if (hit && Date.now() - hit.at < (this.opts.ttlMs ?? 10_000)) return hit.rec;
    if (this.cache.size > 10_000) this.cache.clear();
    const rec = keyByHash(this.db, hash);
    this.cache.set(hash, { at: Date.now(), rec });
    rec.catch(() => this.cache.delete(hash));
    return rec;
  }
}
