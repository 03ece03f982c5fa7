import { ROOT_SCOPE, type Opcode, type RunnerLogLine } from '@dws/protocol';

/** Envelope, commas and the notice lines below. */
export const REPLY_OVERHEAD_BYTES = 4 * 1024;

const size = (v: unknown): number => Buffer.byteLength(JSON.stringify(v), 'utf8');

/**
 * Keeps a reply under `cap` bytes (SPEC Limits: an invoke response over
 * 1 MiB fails the invoke). Opcodes come first, in order: a finished step left
 * out simply runs again on the next pass (step.run is at-least-once), a
 * parking step is found again. Log lines fill what is left. Each cut is
 * announced by a warn line so it is visible in the run's logs.
 */
export function fitReply(opcodes: Opcode[], logs: RunnerLogLine[], cap: number): { opcodes: Opcode[]; logs: RunnerLogLine[] } {
  let used = REPLY_OVERHEAD_BYTES;
  const keptOps: Opcode[] = [];
  for (const op of opcodes) {
    const s = size(op) + 1;
    // The first opcode always goes: the engine already capped each one below the limit.
    if (keptOps.length > 0 && used + s > cap) break;
    keptOps.push(op);
    used += s;
  }
  const keptLogs: RunnerLogLine[] = [];
  let i = 0;
  for (; i < logs.length; i++) {
    const s = size(logs[i]) + 1;
    if (used + s > cap) break;
    keptLogs.push(logs[i]!);
    used += s;
  }
  const notice = (message: string): RunnerLogLine => ({
    level: 'warn',
    message,
    scope: ROOT_SCOPE,
    // Past every index this pass used, so it never collides with a real line.
    index: 1_000_000 + keptLogs.length,
    tsMs: Date.now(),
  });
  if (i < logs.length) keptLogs.push(notice(`${logs.length - i} log lines dropped: the invoke reply is capped at 1 MiB`));
  const droppedOps = opcodes.length - keptOps.length;
  if (droppedOps > 0) {
    keptLogs.push(notice(`${droppedOps} finished steps left out of this reply (1 MiB cap); they are reported on the next pass`));
  }
  return { opcodes: keptOps, logs: keptLogs };
}
