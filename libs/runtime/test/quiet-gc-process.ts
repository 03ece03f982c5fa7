// heap.test's scenarios, each in a fresh process: what a collection keeps is read off the whole heap, and
// jest's process is shared by many test files (in ESM mode it keeps their modules: ~1.1 GB by mid-run on
// CI before jest.config's worker limit), whose leftovers, and a young generation sized by them (how much a
// scenario's own garbage gets promoted), move the readings by more than the 8 MiB a scenario holds.
// Prints one JSON line: what the scenario saw; heap.test judges it.
import { collectWhenQuiet, fullCollection, heapLiveBytes } from '../src/heap.js';

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

async function untilTrue(pred: () => boolean, ms: number): Promise<void> {
  for (const deadline = Date.now() + ms; !pred() && Date.now() < deadline; ) await sleep(10);
}

const gc = fullCollection();
gc();
// The collection's reading comes in a performance entry a moment later (0 until the first).
await untilTrue(() => heapLiveBytes() > 0, 5_000);
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
  await untilTrue(() => calls > 0, 5_000);
  seen.callsAtFirst = calls;
  await untilTrue(() => heapLiveBytes() >= liveBefore + 6 * MiB, 5_000);
  seen.liveAfter = heapLiveBytes();
  // Long enough for three more quiet checks.
  await sleep(350);
}
stop();
seen.calls = calls;
seen.held = held.length;
process.stdout.write(`${JSON.stringify(seen)}\n`);
