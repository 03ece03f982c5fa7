/**
 * The measurement rules every mode of `pnpm bench` shares (bench.ts for our
 * deployments, peers/*.ts for the systems we compare with): percentiles,
 * rounding and CPU time read from /proc.
 */
import { readFileSync } from 'node:fs';

/** One workload's figures in one repetition (name -> number). */
export type Figures = Record<string, number>;

export const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
export const median = (xs: number[]) => pct(xs, 50);
export const r1 = (x: number) => Math.round(x * 100) / 100;

/** CPU ms used so far by a process (utime + stime from /proc); 0 once it is gone. */
export function cpuMs(pid: number): number {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / 100; // clock ticks at 100 Hz
  } catch {
    return 0;
  }
}
