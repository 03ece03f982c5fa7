/**
 * The token a runner sends its checkpoints under (`ctx.checkpoint` of an
 * invoke): which scheduler replica drives the pass, and which pass it is.
 * Opaque to runners, the gateway and the invoker; it grants nothing by
 * itself: the replica stores a checkpoint only for a run it holds, in the
 * caller's workspace, at that very pass.
 */
export function checkpointToken(replica: string, pass: number): string {
  return `${replica}.${pass}`;
}

const TOKEN = /^([A-Za-z0-9-]{1,64})\.(\d{1,15})$/;

export function parseCheckpointToken(token: unknown): { replica: string; pass: number } | undefined {
  if (typeof token !== 'string') return undefined;
  const m = TOKEN.exec(token);
  return m ? { replica: m[1]!, pass: Number(m[2]) } : undefined;
}
