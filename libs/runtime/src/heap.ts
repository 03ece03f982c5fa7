import { setFlagsFromString } from 'node:v8';

/**
 * How far V8 lets the old generation grow past what survived its last full
 * collection before it collects again (SERVICE_HEAP_GROWTH_PERCENT; 0 leaves
 * V8's own factor). V8 picks 10-300% from its GC speed: a service holds a few
 * tens of MB live and churns run state that dies after a promotion or two, so
 * at 300% most of its RSS is garbage waiting (embedded W2: 128 MiB of heap
 * "in use", 40 live). V8 reads the flag at each collection, so setting it at
 * start, after the heap exists, takes effect.
 */
export function limitHeapGrowth(percent: number): void {
  if (percent > 0) setFlagsFromString(`--heap-growing-percent=${percent}`);
}
