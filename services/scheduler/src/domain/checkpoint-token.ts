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
  constructor(
    readonly replica: string,
    // Per process: a restarted replica drives no pass of its predecessor's anyway. A KeyObject: no key import per MAC.
    private readonly key: KeyObject = createSecretKey(randomBytes(32)),
  ) {}

  mint(runId: string, pass: number): string {
    return `${this.replica}.${pass}.${this.mac(runId, pass)}`;
  }

  /** True when this replica minted `token` for this run at its pass. */
  verify(runId: string, token: ParsedToken): boolean {
    if (token.replica !== this.replica) return false;
    const want = Buffer.from(this.mac(runId, token.pass));
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
