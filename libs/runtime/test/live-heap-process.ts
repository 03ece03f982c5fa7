// metrics.test's live-heap scenario in a fresh process (why: scenario.ts).
// Prints one JSON line of `dws_process_heap_live_bytes` as /metrics showed it at each point.
import { fullCollection } from '../src/heap.js';
import { metricsText } from '../src/metrics.js';
import { until } from './scenario.js';

const liveHeap = async () => Number(/^dws_process_heap_live_bytes (\S+)/m.exec(await metricsText())?.[1]);
/** The gauge once `pred` holds, or after 10 s. */
async function reads(pred: (v: number) => boolean): Promise<number> {
  let v = 0;
  await until(async () => pred((v = await liveHeap())), 10_000);
  return v;
}

const fullGc = fullCollection();
fullGc();
const base = await reads((v) => v > 0);
// 20 MB kept alive across a full collection.
let held = Array.from({ length: 2_500 }, (_, i) => new Array<number>(1000).fill(i));
fullGc();
const withHeld = await reads((v) => v > base + 15e6);
const heldLength = held.length;
// Let go: the next full collection finds it gone.
held = [];
fullGc();
const released = await reads((v) => v < base + 5e6);
// Garbage left lying about, and no full collection since.
let junk = 0;
for (let i = 0; i < 1000; i++) junk += JSON.stringify({ i, pad: 'y'.repeat(1000) }).length;
const afterJunk = await liveHeap();
process.stdout.write(`${JSON.stringify({ base, withHeld, heldLength, released, junk, afterJunk })}\n`);
