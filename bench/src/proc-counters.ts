import { readdirSync, readFileSync } from 'node:fs';

/**
 * What a process asked of the kernel so far: read and write system calls
 * (`/proc/<pid>/io`) and the times one of its threads went to sleep waiting
 * (voluntary context switches, summed over its threads). Unlike CPU time they
 * do not move with the VM's speed, so two commits can be compared on a day
 * the machine runs several times slower than the day before: a hop saved is
 * a write fewer on one side and a wake-up fewer on the other.
 */
export interface ProcCounters {
  syscalls: number;
  wakeups: number;
}

export const zeroCounters = (): ProcCounters => ({ syscalls: 0, wakeups: 0 });

/** Zero once the process is gone (or not ours to read). */
export function procCounters(pid: number): ProcCounters {
  const out = zeroCounters();
  try {
    const io = readFileSync(`/proc/${pid}/io`, 'utf8');
    out.syscalls = Number(/^syscr: (\d+)/m.exec(io)?.[1] ?? 0) + Number(/^syscw: (\d+)/m.exec(io)?.[1] ?? 0);
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        out.wakeups += Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8'))?.[1] ?? 0);
      } catch {
        // the thread ended meanwhile
      }
    }
  } catch {
    // gone
  }
  return out;
}

export function addCounters(a: ProcCounters, b: ProcCounters): ProcCounters {
  return { syscalls: a.syscalls + b.syscalls, wakeups: a.wakeups + b.wakeups };
}
