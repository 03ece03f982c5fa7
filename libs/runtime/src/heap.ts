import { constants as perf, performance, PerformanceObserver, type EventLoopUtilization } from 'node:perf_hooks';
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** The process's heap settings (SERVICE_HEAP_GROWTH_PERCENT, SERVICE_QUIET_GC_SECONDS): see the two below. */
export function manageHeap(cfg: { SERVICE_HEAP_GROWTH_PERCENT: number; SERVICE_QUIET_GC_SECONDS: number }): void {
  limitHeapGrowth(cfg.SERVICE_HEAP_GROWTH_PERCENT);
  collectWhenQuiet(cfg.SERVICE_QUIET_GC_SECONDS * 1000);
}

/**
 * How far V8 lets the old generation grow past what survived its last full
 * collection before it collects again (SERVICE_HEAP_GROWTH_PERCENT; 0 leaves
 * V8's own factor). V8 picks 10-300% from its GC speed: a service holds a few
 * tens of MB live and churns run state that dies after a promotion or two, so
 * at 300% most of its RSS is garbage waiting (embedded W2: 128 MiB of heap
 * "in use", 40 live). V8 reads the flag at each collection, so setting it at
 * start, after the heap exists, takes effect.
 */
function limitHeapGrowth(percent: number): void {
  if (percent > 0) setFlagsFromString(`--heap-growing-percent=${percent}`);
}

// What the gc performance entries tell: time in the collector, and what the last full collection kept
// (what the process keeps alive: heap in use also counts garbage not collected yet). A full collection
// leaves every survivor in the old generation; its entry arrives a moment later, when the young one may
// already hold new garbage (a busy process, a loaded machine), so the old generation alone is read.
let gcMs = 0;
let liveAfterFullGc = 0;
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    gcMs += e.duration;
    if ((e as { detail?: { kind?: number } }).detail?.kind === perf.NODE_PERFORMANCE_GC_MAJOR) liveAfterFullGc = oldGenerationUsed();
  }
}).observe({ entryTypes: ['gc'] });

/** Time the garbage collector held the main thread since start (ms). */
export const gcMillis = (): number => gcMs;
/** What V8's last full collection kept: its old generation in use just after (0 before the first). */
export const heapLiveBytes = (): number => liveAfterFullGc;

/** Garbage past the last full collection's survivors that a quiet process collects at once. */
export const QUIET_GARBAGE_BYTES = 4 * 1024 * 1024;
/** Below this share of the interval spent running, the process counts as quiet. */
const QUIET_UTILIZATION = 0.1;

/** Whether a quiet process should collect now: pure, for the interval's readings. */
export function quietCollectionDue(r: { utilization: number; usedBytes: number; liveBytes: number }): boolean {
  return r.utilization < QUIET_UTILIZATION && r.usedBytes - r.liveBytes >= QUIET_GARBAGE_BYTES;
}

/**
 * V8 collects the old generation again only once it has grown at least
 * ~8 MiB past the last full collection's survivors, whatever the growth
 * factor says. A service with little to do (the invoker, approvals while
 * the scheduler is busy) makes that much garbage in half an hour or more,
 * and holds it in RSS all the while (docs/profiles.md "2026-11-29
 * morning"). Every `everyMs`, a process whose event loop was quiet over the
 * interval and whose old generation holds QUIET_GARBAGE_BYTES more than the
 * last full collection kept (garbage, or what became live since) collects:
 * a full collection of a quiet 20-30 MiB heap takes a few ms, and a busy
 * process (never quiet) is left to V8. `everyMs` 0 turns it off. Returns a
 * stop function; `collect` is V8's full collection (tests wrap it).
 */
export function collectWhenQuiet(everyMs: number, collect?: () => void): () => void {
  if (everyMs <= 0) return () => {};
  const gc = collect ?? fullCollection();
  let since: EventLoopUtilization = performance.eventLoopUtilization();
  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    const utilization = performance.eventLoopUtilization(now, since).utilization;
    since = now;
    if (quietCollectionDue({ utilization, usedBytes: oldGenerationUsed(), liveBytes: liveAfterFullGc })) gc();
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}

/**
 * One full collection once the process has started (SERVICE_QUIET_GC_SECONDS
 * 0 turns it off with the quiet ones). What a start makes (module init,
 * migrations, first connections) is garbage once it is done, and Node 22's
 * V8 may run no full collection at all while a service starts (Node 20 ran
 * three): the invoker and approvals then held 15-20 MiB more heap until their
 * first quiet interval (docs/profiles.md "2026-11-30 midday"). A few ms, once.
 */
export function collectAfterStart(cfg: { SERVICE_QUIET_GC_SECONDS: number }): void {
  if (cfg.SERVICE_QUIET_GC_SECONDS > 0) fullCollection()();
}

const YOUNG = new Set(['new_space', 'new_large_object_space']);

/** Heap in use outside the young generation, whose garbage scavenges take: what only a full collection frees. */
function oldGenerationUsed(): number {
  let used = 0;
  for (const s of getHeapSpaceStatistics()) if (!YOUNG.has(s.space_name)) used += s.space_used_size;
  return used;
}

let gcFn: (() => void) | undefined;

/**
 * V8's `gc()` without `--expose-gc` on the command line: the flag applies to
 * contexts created after it is set, so a new context is made with it and
 * the flag is cleared again (no other context gets the function).
 */
export function fullCollection(): () => void {
  if (gcFn) return gcFn;
  const exposed = typeof (globalThis as { gc?: unknown }).gc === 'function';
  if (!exposed) setFlagsFromString('--expose-gc');
  gcFn = runInNewContext('gc') as () => void;
  if (!exposed) setFlagsFromString('--no-expose-gc');
  return gcFn;
}
