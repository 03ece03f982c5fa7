import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

/**
 * Random bytes from a pool refilled 4 KiB at a time: one small randomBytes()
 * call costs about as much as a large one (a getrandom syscall; ~50 us on
 * the benchmark VM), and ids and trace ids are taken on every pass.
 */
const POOL_BYTES = 4096;
let pool = randomBytes(POOL_BYTES);
let poolAt = 0;
export function randomPooled(n: number): Buffer {
  if (n > POOL_BYTES) return randomBytes(n);
  if (poolAt + n > POOL_BYTES) {
    pool = randomBytes(POOL_BYTES);
    poolAt = 0;
  }
  poolAt += n;
  // A copy, so that a caller keeping the bytes never sees them reused.
  return Buffer.from(pool.subarray(poolAt - n, poolAt));
}

/**
 * Time-ordered ids (48-bit ms timestamp + 80 random bits, Crockford base32,
 * ULID layout) with a readable prefix: `run_01h...`. Sorting by id sorts by
 * creation time, which keyset paging relies on. Monotonic within a process:
 * ids taken in the same millisecond increment the previous random part, so
 * rows written in one millisecond (equal `created_at`) still list in order.
 */
let lastTime = -1;
let lastRand: Buffer = Buffer.alloc(10);
function ulid(now = Date.now()): string {
  let t = Math.max(now, lastTime);
  if (t === lastTime) {
    lastRand = Buffer.from(lastRand);
    for (let i = lastRand.length - 1; i >= 0; i--) {
      lastRand[i] = (lastRand[i]! + 1) & 0xff;
      if (lastRand[i] !== 0) break;
    }
  } else {
    lastRand = randomPooled(10);
  }
  lastTime = t;
  let time = '';
  for (let i = 0; i < 10; i++) {
    time = ALPHABET[t % 32] + time;
    t = Math.floor(t / 32);
  }
  let rand = '';
  let acc = 0;
  let bits = 0;
  for (const b of lastRand) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      rand += ALPHABET[(acc >> bits) & 31];
    }
    acc &= (1 << bits) - 1;
  }
  return time + rand;
}

export const ids = {
  run: () => `run_${ulid()}`,
  event: () => `evt_${ulid()}`,
  workspace: () => `ws_${ulid()}`,
  key: () => `key_${ulid()}`,
  generic: (prefix: string) => `${prefix}_${ulid()}`,
};
