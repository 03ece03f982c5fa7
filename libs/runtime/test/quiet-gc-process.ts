// heap.test's scenarios (quiet, busy), each in a fresh process (why: scenario.ts).
import { collectWhenQuiet, fullCollection, heapLiveBytes } from '../src/heap.js';
import { until } from './scenario.js';

const MiB = 1024 * 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** 8 MiB the last full collection did not see, promoted to the old generation (scavenges only promote what survived two). */
function heldInOldGeneration(): number[][] {
  const held = Array.from({ length: 1_000 }, (_, i) => new Array<number>(1000).fill(i));
  // Short-lived garbage (kept in a ring, so the compiler cannot elide it) for a few scavenges.
  const ring: unknown[] = new Array(1024);
  for (let i = 0; i < 400_000; i++) ring[i % 1024] = { i, a: [i, i + 1] };
  return held;
}

const gc = fullCollection();
gc();
// 0 until the first collection's reading.
await until(() => heapLiveBytes() > 0, 5_000);
const liveBefore = heapLiveBytes();
const held = heldInOldGeneration();
let calls = 0;
const stop = collectWhenQuiet(100, () => {
  calls++;
  gc();
});
const seen: Record<string, number> = { liveBefore };
if (process.argv[2] === 'busy') {
  // Busy 30 ms of every ~35 for a second: well past the quiet share.
  const until = Date.now() + 1_000;
  while (Date.now() < until) {
    const spin = Date.now() + 30;
    while (Date.now() < spin);
    await sleep(5);
  }
} else {
  await until(() => calls > 0, 5_000);
  seen.callsAtFirst = calls;
  await until(() => heapLiveBytes() >= liveBefore + 6 * MiB, 5_000);
  seen.liveAfter = heapLiveBytes();
  // Long enough for three more quiet checks.
  await sleep(350);
}
stop();
seen.calls = calls;
seen.held = held.length;
process.stdout.write(`${JSON.stringify(seen)}\n`);
