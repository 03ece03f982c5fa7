import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { PollLoop } from './poll-loop.js';

/** Let the loop's promise chains settle under fake timers. */
const settle = async () => {
  for (let i = 0; i < 10; i++) await Promise.resolve();
};

describe('PollLoop', () => {
  beforeEach(() => {
    jest.useFakeTimers();
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('without nextDueInMs, runs the work at start and every pollMs after its last run', async () => {
    let runs = 0;
    const loop = new PollLoop(async () => void runs++, { pollMs: 1000, onError: () => undefined });
    loop.start();
    await settle();
    expect(runs).toBe(1);
    await jest.advanceTimersByTimeAsync(999);
    expect(runs).toBe(1);
    await jest.advanceTimersByTimeAsync(1);
    expect(runs).toBe(2);
    await loop.stop();
  });

  it('sleeps until the next item is due (bounded by pollMs), and runs the work only when something is due', async () => {
    let dueAt: number | undefined; // fake-clock ms of the next item
    let looks = 0;
    let runs = 0;
    const loop = new PollLoop(
      async () => {
        runs++;
        dueAt = undefined; // done
      },
      { pollMs: 60_000, onError: () => undefined, nextDueInMs: async () => (looks++, dueAt === undefined ? undefined : dueAt - Date.now()) },
    );
    loop.start();
    await settle();
    expect([looks, runs]).toEqual([1, 0]); // nothing armed: one look, then a minute's sleep
    await jest.advanceTimersByTimeAsync(30_000);
    expect(looks).toBe(1);

    dueAt = Date.now() + 700;
    loop.kick(); // armed here
    await settle();
    expect([looks, runs]).toEqual([2, 0]);
    await jest.advanceTimersByTimeAsync(699);
    expect(runs).toBe(0);
    await jest.advanceTimersByTimeAsync(1);
    expect(runs).toBe(1);
    expect(looks).toBe(4); // the look that found it due, and the one after the work

    dueAt = Date.now() + 10 * 60_000; // far off: pollMs bounds the sleep
    loop.kick();
    await settle();
    const before = looks;
    await jest.advanceTimersByTimeAsync(60_000);
    expect(looks).toBe(before + 1);
    expect(runs).toBe(1);
    await loop.stop();
  });

  it('an item still due after the work (another replica holds it) is looked at again after a pause, not at once', async () => {
    let runs = 0;
    const loop = new PollLoop(async () => void runs++, { pollMs: 60_000, onError: () => undefined, nextDueInMs: async () => -5 });
    loop.start();
    await settle();
    expect(runs).toBe(1);
    await jest.advanceTimersByTimeAsync(249);
    expect(runs).toBe(1);
    await jest.advanceTimersByTimeAsync(1);
    expect(runs).toBe(2);
    await loop.stop();
  });

  it('a kick while the work runs asks for one more run right after; a failed run is reported and retried at the next poll', async () => {
    let release!: () => void;
    let runs = 0;
    const errors: unknown[] = [];
    const loop = new PollLoop(
      async () => {
        runs++;
        if (runs === 1) await new Promise<void>((r) => (release = r));
        if (runs === 2) throw new Error('db down');
      },
      { pollMs: 1000, onError: (err) => errors.push(err) },
    );
    loop.start();
    await settle();
    loop.kick();
    loop.kick();
    release();
    await settle();
    expect(runs).toBe(2);
    expect(errors).toHaveLength(1);
    await jest.advanceTimersByTimeAsync(1000);
    expect(runs).toBe(3);
    await loop.stop();
    await jest.advanceTimersByTimeAsync(5000);
    expect(runs).toBe(3);
  });

  it('kick(true) runs the work without a look first; within(ms) looks by then without a statement now', async () => {
    let dueAt: number | undefined;
    let looks = 0;
    let runs = 0;
    const loop = new PollLoop(
      async () => {
        runs++;
        dueAt = undefined;
      },
      { pollMs: 60_000, onError: () => undefined, nextDueInMs: async () => (looks++, dueAt === undefined ? undefined : dueAt - Date.now()) },
    );
    loop.start();
    await settle();
    expect([looks, runs]).toEqual([1, 0]);

    loop.kick(true); // the caller made an item due: straight to the work, then one look for the next
    await settle();
    expect([looks, runs]).toEqual([2, 1]);

    dueAt = Date.now() + 3000;
    loop.within(3000); // armed for later: nothing asked now
    await settle();
    expect(looks).toBe(2);
    loop.within(10_000); // later than the look already planned: no change
    await jest.advanceTimersByTimeAsync(2999);
    expect([looks, runs]).toEqual([2, 1]);
    await jest.advanceTimersByTimeAsync(1);
    expect(runs).toBe(2);
    await loop.stop();
  });

  it('within() while the work runs shortens the sleep that follows it', async () => {
    let release!: () => void;
    let looks = 0;
    let runs = 0;
    const loop = new PollLoop(
      async () => {
        runs++;
        if (runs === 1) await new Promise<void>((r) => (release = r));
      },
      { pollMs: 60_000, onError: () => undefined, nextDueInMs: async () => (looks++ === 0 ? 0 : undefined) },
    );
    loop.start();
    await settle();
    expect(runs).toBe(1);
    loop.within(500); // armed while the round runs: its closing look may have missed it
    release();
    await settle();
    expect(looks).toBe(2);
    await jest.advanceTimersByTimeAsync(499);
    expect(looks).toBe(2);
    await jest.advanceTimersByTimeAsync(1);
    expect(looks).toBe(3);
    await loop.stop();
  });
});
