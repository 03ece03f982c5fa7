import { describe, expect, it } from '@jest/globals';
import { isTransientApiError, untilAnswered } from './jetstream-admin.js';

const named = (name: string, cause?: unknown) => Object.assign(new Error(name), { name, cause });

describe('untilAnswered', () => {
  const clock = () => {
    let t = 0;
    return { now: () => t, sleep: async (ms: number) => void (t += ms), log: { warn: () => undefined }, isOpen: () => true };
  };

  it('tells a lost request or a JetStream not up yet from a final refusal', () => {
    expect(isTransientApiError(named('TimeoutError'))).toBe(true);
    expect(isTransientApiError(named('JetStreamNotEnabled', named('NoResponders')))).toBe(true);
    expect(isTransientApiError(named('RequestError', named('TimeoutError')))).toBe(true);
    expect(isTransientApiError(named('JetStreamApiError'))).toBe(false);
    expect(isTransientApiError(named('ClosedConnectionError'))).toBe(false);
    expect(isTransientApiError('timeout')).toBe(false);
  });

  it('retries a transient failure with a growing wait until the call is answered', async () => {
    const c = clock();
    const waits: number[] = [];
    let calls = 0;
    const got = await untilAnswered(
      'stream S',
      async () => {
        if (++calls < 5) throw named('TimeoutError');
        return 'ok';
      },
      { ...c, sleep: async (ms) => (waits.push(ms), c.sleep(ms)) },
    );
    expect(got).toBe('ok');
    expect(waits).toEqual([250, 500, 1000, 2000]);
  });

  it('throws a final error at once, and a transient one once its patience is spent or the bus closes', async () => {
    let calls = 0;
    const refuse = async () => {
      calls++;
      throw named('JetStreamApiError');
    };
    await expect(untilAnswered('s', refuse, clock())).rejects.toThrow('JetStreamApiError');
    expect(calls).toBe(1);

    const c = clock();
    const lose = async () => {
      throw named('TimeoutError');
    };
    await expect(untilAnswered('s', lose, { ...c, patienceMs: 10_000 })).rejects.toThrow('TimeoutError');
    expect(c.now()).toBeLessThanOrEqual(10_000);
    expect(c.now()).toBeGreaterThan(6_000);

    let open = true;
    calls = 0;
    const closing = async () => {
      calls++;
      open = false;
      throw named('TimeoutError');
    };
    await expect(untilAnswered('s', closing, { ...clock(), isOpen: () => open })).rejects.toThrow('TimeoutError');
    expect(calls).toBe(1);
  });
});
