import { createHmac, createSecretKey, randomBytes, timingSafeEqual, type KeyObject } from 'node:crypto';

/**
 * The token a runner sends its checkpoints under (`ctx.checkpoint` of an
 * invoke): which scheduler replica drives the pass, which pass it is, and a
 * MAC over the run id and pass under a key only that replica holds. Opaque
 * to runners, the gateway and the invoker. Through the gateway the caller's
 * key already names the workspace; straight to the replica
 * (`ctx.checkpointUrl`) the MAC is the only credential, so it binds the run:
 * a token of one run stores nothing into another.
 */
export class CheckpointTokens {
  /**
   * The MAC last minted for each run, most recent last: a pass's checkpoints (one per step) are
   * checked against it, not a MAC computed again for each (an HMAC was ~4% of the scheduler's CPU
   * under W2). Bounded well past the runs a replica drives at once.
   */
  private readonly minted = new Map<string, { pass: number; mac: string }>();

  constructor(
    readonly replica: string,
    // Per process: a restarted replica drives no pass of its predecessor's anyway. A KeyObject: no key import per MAC.
    private readonly key: KeyObject = createSecretKey(randomBytes(32)),
    private readonly remember = 8192,
  ) {}

  mint(runId: string, pass: number): string {
    const mac = this.mac(runId, pass);
    this.minted.delete(runId);
    this.minted.set(runId, { pass, mac });
    if (this.minted.size > this.remember) this.minted.delete(this.minted.keys().next().value!);
    return `${this.replica}.${pass}.${mac}`;
  }

  /** True when this replica minted `token` for this run at its pass. */
  verify(runId: string, token: ParsedToken): boolean {
    if (token.replica !== this.replica) return false;
    const last = this.minted.get(runId);
    const want = Buffer.from(last?.pass === token.pass ? last.mac : this.mac(runId, token.pass));
    const got = Buffer.from(token.mac);
    return got.length === want.length && timingSafeEqual(got, want);
  }

  private mac(runId: string, pass: number): string {
    return createHmac('sha256', this.key).update(`${runId}.${pass}`).digest('base64url').slice(0, 22);
  }
}

/** The direct checkpoint route of a run under a replica's base URL (`ctx.checkpointUrl`). */
export const checkpointPath = (runId: string): string => `/checkpoints/${encodeURIComponent(runId)}`;

export interface ParsedToken {
  replica: string;
  pass: number;
  mac: string;
}

const TOKEN = /^([A-Za-z0-9-]{1,64})\.(\d{1,15})\.([A-Za-z0-9_-]{22})$/;

export function parseCheckpointToken(token: unknown): ParsedToken | undefined {
  if (typeof token !== 'string') return undefined;
  const m = TOKEN.exec(token);
  return m ? { replica: m[1]!, pass: Number(m[2]), mac: m[3]! } : undefined;
}
