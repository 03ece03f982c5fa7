/**
 * The Bus contract: one suite, run against every adapter (see *.int.test.ts).
 * Every test uses its own stream and subjects, so files can share a server.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Bus, BusMessage, Subscription } from '../src/index.js';

export interface ContractOptions {
  /** Remove what the suite created (JetStream: streams, DLQ readers, dead letters). */
  cleanup?: (created: { streams: string[]; dlqReaders: string[] }) => Promise<void>;
  /**
   * Start a responder on `subject` in a process of its own, whose handler never ends;
   * resolves once it listens. `handling` resolves when a request reached the handler,
   * `kill` is a SIGKILL. Left out by adapters whose responders share the requester's process.
   */
  separateResponder?: (subject: string) => Promise<DoomedResponder>;
}

export interface DoomedResponder {
  handling: Promise<void>;
  kill(): void;
}

const T = 20_000;
// Tests share one bus but nothing else (own stream, own subjects), and mostly
// wait on timers: running them side by side keeps each adapter's suite short.
const test = it.concurrent;
const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor(what: string, cond: () => boolean | Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

/** Declare the contract suite for one adapter. `makeBus` must return a fresh, connected Bus. */
export function runBusContract(name: string, makeBus: () => Promise<Bus>, opts: ContractOptions = {}): void {
  describe(`Bus contract: ${name}`, () => {
    let bus: Bus;
    const subs: Subscription[] = [];
    const created = { streams: [] as string[], dlqReaders: [] as string[] };

    beforeAll(async () => {
      bus = await makeBus();
    }, T);

    afterAll(async () => {
      await Promise.all(subs.map((s) => s.stop()));
      await bus?.close();
      await opts.cleanup?.(created);
    }, T);

    /** A fresh stream on `<prefix>.>` (prefix unique to the test). */
    async function freshStream(extra: { maxAgeMs?: number; duplicateWindowMs?: number } = {}) {
      const id = Math.random().toString(36).slice(2, 10);
      const stream = `T_${id}`.toUpperCase();
      const prefix = `t${id}`;
      created.streams.push(stream);
      await bus.ensureStream({ name: stream, subjects: [`${prefix}.>`], ...extra });
      return { id, stream, prefix };
    }

    async function consume(...args: Parameters<Bus['consume']>): Promise<Subscription> {
      const s = await bus.consume(...args);
      subs.push(s);
      return s;
    }

    function collector() {
      const got: BusMessage[] = [];
      return { got, handler: async (m: BusMessage) => void got.push(m) };
    }

    describe('streams', () => {
      test('ensureStream is idempotent, also when replicas race', async () => {
        const { stream, prefix } = await freshStream();
        const spec = { name: stream, subjects: [`${prefix}.>`] };
        await Promise.all([bus.ensureStream(spec), bus.ensureStream(spec), bus.ensureStream(spec)]);
        await bus.ensureStream({ ...spec, maxAgeMs: 3600_000 });
        await bus.publish(`${prefix}.x`, enc('ok'));
      }, T);

      test('rejects a publish no stream stores with no_responders', async () => {
        await expect(bus.publish(`nostream${Date.now()}.x`, enc('x'))).rejects.toMatchObject({ code: 'no_responders' });
      }, T);

      test('delivers published messages and forgets them once acked', async () => {
        const { stream, prefix, id } = await freshStream();
        await bus.publish(`${prefix}.a`, enc('one'), { msgId: `${id}-1` });
        await bus.publish(`${prefix}.b`, enc('two'));
        const c = collector();
        await consume({ stream, durable: 'd', ackWaitMs: 500 }, c.handler);
        await bus.publish(`${prefix}.a`, enc('three'));
        await waitFor('3 messages', () => c.got.length >= 3);
        expect(c.got.map((m) => dec(m.data))).toEqual(['one', 'two', 'three']);
        expect(c.got.map((m) => m.subject)).toEqual([`${prefix}.a`, `${prefix}.b`, `${prefix}.a`]);
        expect(c.got.map((m) => m.deliveryCount)).toEqual([1, 1, 1]);
        expect(c.got[0]!.msgId).toBe(`${id}-1`);
        expect(c.got[1]!.msgId).toBeUndefined();
        expect(c.got[0]!.seq).toBeLessThan(c.got[1]!.seq);
        expect(c.got[1]!.seq).toBeLessThan(c.got[2]!.seq);
        await sleep(900); // past ackWait: nothing comes back
        expect(c.got).toHaveLength(3);
      }, T);

      test('drops a repeated msgId within the duplicate window', async () => {
        const { stream, prefix, id } = await freshStream();
        for (let i = 0; i < 3; i++) await bus.publish(`${prefix}.a`, enc('dup'), { msgId: `${id}-same` });
        await bus.publish(`${prefix}.a`, enc('other'), { msgId: `${id}-other` });
        const c = collector();
        await consume({ stream, durable: 'd' }, c.handler);
        await waitFor('2 messages', () => c.got.length >= 2);
        await sleep(300);
        expect(c.got.map((m) => dec(m.data))).toEqual(['dup', 'other']);
      }, T);

      test('only delivers the filter subject', async () => {
        const { stream, prefix } = await freshStream();
        for (const s of ['a.x', 'b.x', 'a.y', 'a.x.deep']) await bus.publish(`${prefix}.${s}`, enc(s));
        const c = collector();
        await consume({ stream, durable: 'only_a', filterSubject: `${prefix}.a.*` }, c.handler);
        await waitFor('2 messages', () => c.got.length >= 2);
        await sleep(300);
        expect(c.got.map((m) => dec(m.data))).toEqual(['a.x', 'a.y']);
      }, T);
    });

    describe('redelivery', () => {
      test('redelivers after a throw with deliveryCount incremented', async () => {
        const { stream, prefix } = await freshStream();
        const counts: number[] = [];
        await consume({ stream, durable: 'd', backoffMs: [100] }, async (m) => {
          counts.push(m.deliveryCount);
          if (m.deliveryCount < 3) throw new Error('not yet');
        });
        await bus.publish(`${prefix}.a`, enc('x'));
        await waitFor('3 deliveries', () => counts.length >= 3);
        await sleep(400);
        expect(counts).toEqual([1, 2, 3]);
      }, T);

      test('waits the backoff schedule between failures (last entry repeats)', async () => {
        const { stream, prefix } = await freshStream();
        const at: number[] = [];
        await consume({ stream, durable: 'd', backoffMs: [200, 600] }, async (m) => {
          at.push(Date.now());
          if (m.deliveryCount < 4) throw new Error('again');
        });
        await bus.publish(`${prefix}.a`, enc('x'));
        await waitFor('4 deliveries', () => at.length >= 4, 8000);
        const gaps = at.slice(1).map((t, i) => t - at[i]!);
        expect(gaps[0]).toBeGreaterThanOrEqual(180);
        expect(gaps[0]).toBeLessThan(1200);
        expect(gaps[1]).toBeGreaterThanOrEqual(570);
        expect(gaps[1]).toBeLessThan(1600);
        expect(gaps[2]).toBeGreaterThanOrEqual(570);
      }, T);

      test('dead-letters after maxDeliver failures and stops redelivering', async () => {
        const { stream, prefix, id } = await freshStream();
        let attempts = 0;
        await consume({ stream, durable: 'worker', maxDeliver: 3, backoffMs: [50] }, async () => {
          attempts++;
          throw new Error('poison\nmessage');
        });
        await bus.publish(`${prefix}.cmd`, enc('bad'), { msgId: `${id}-bad` });

        const reader = `dlqr_${id}`;
        created.dlqReaders.push(reader);
        const dead = collector();
        await consume({ stream: 'DLQ', durable: reader, filterSubject: `dlq.${stream}.worker` }, dead.handler);
        await waitFor('a dead letter', () => dead.got.length >= 1);
        await sleep(600);
        expect(attempts).toBe(3);
        expect(dead.got).toHaveLength(1);
        const d = dead.got[0]!;
        expect(dec(d.data)).toBe('bad');
        expect(d.subject).toBe(`dlq.${stream}.worker`);
        expect(d.headers).toMatchObject({
          'Dws-Dlq-Stream': stream,
          'Dws-Dlq-Subject': `${prefix}.cmd`,
          'Dws-Dlq-Durable': 'worker',
          'Dws-Dlq-Deliveries': '3',
          'Dws-Dlq-Msg-Id': `${id}-bad`,
        });
        expect(d.headers?.['Dws-Dlq-Error']).toMatch(/^poison/);
      }, T);

      test('retryInMs redelivers without dead-lettering', async () => {
        const { stream, prefix } = await freshStream();
        const counts: number[] = [];
        await consume({ stream, durable: 'd', maxDeliver: 1, backoffMs: [5000] }, async (m) => {
          counts.push(m.deliveryCount);
          return m.deliveryCount < 3 ? { retryInMs: 100 } : undefined;
        });
        await bus.publish(`${prefix}.a`, enc('x'));
        await waitFor('3 deliveries', () => counts.length >= 3);
        await sleep(300);
        expect(counts).toEqual([1, 2, 3]);
      }, T);

      test('redelivers when the ack wait expires on a hung handler', async () => {
        const { stream, prefix } = await freshStream();
        const g = gate();
        const counts: number[] = [];
        await consume({ stream, durable: 'd', ackWaitMs: 500, concurrency: 2 }, async (m) => {
          counts.push(m.deliveryCount);
          if (m.deliveryCount === 1) await g.wait;
        });
        const t0 = Date.now();
        await bus.publish(`${prefix}.a`, enc('x'));
        await waitFor('the redelivery', () => counts.length >= 2, 4000);
        expect(Date.now() - t0).toBeGreaterThanOrEqual(450);
        expect(counts).toEqual([1, 2]);
        g.open();
      }, T);

      test('working() holds the ack deadline off', async () => {
        const { stream, prefix } = await freshStream();
        let deliveries = 0;
        let done = false;
        await consume({ stream, durable: 'd', ackWaitMs: 500, concurrency: 2 }, async (m) => {
          deliveries++;
          for (let i = 0; i < 8; i++) {
            await sleep(150);
            m.working();
          }
          done = true;
        });
        await bus.publish(`${prefix}.a`, enc('x'));
        await waitFor('the slow handler', () => done, 5000);
        await sleep(700);
        expect(deliveries).toBe(1);
      }, T);
    });

    describe('consumers', () => {
      test('reports each durable it consumes with its backlog, down to zero once handled', async () => {
        const { stream, prefix } = await freshStream();
        const held = gate();
        let handled = 0;
        await consume({ stream, durable: 'lagging', concurrency: 1 }, async () => {
          await held.wait;
          handled++;
        });
        for (let i = 0; i < 3; i++) await bus.publish(`${prefix}.lag`, enc(String(i)));
        const mine = async () => (await bus.backlog()).find((b) => b.stream === stream && b.durable === 'lagging');
        // The handler holds the first: every message is either waiting or given out and not acked.
        await waitFor('a backlog of 3', async () => {
          const b = await mine();
          return b !== undefined && b.pending + b.ackPending === 3;
        });
        held.open();
        await waitFor('3 handled', () => handled >= 3);
        await waitFor('no backlog', async () => {
          const b = await mine();
          return b !== undefined && b.pending === 0 && b.ackPending === 0;
        });
      }, T);

      test('keeps stream order per subject with concurrency 1', async () => {
        const { stream, prefix } = await freshStream();
        const n = 25;
        for (let i = 0; i < n; i++) await bus.publish(`${prefix}.k`, enc(String(i)));
        const seen: number[] = [];
        await consume({ stream, durable: 'd' }, async (m) => {
          await sleep(Math.random() * 5);
          seen.push(Number(dec(m.data)));
        });
        await waitFor(`${n} messages`, () => seen.length >= n);
        expect(seen).toEqual([...Array(n).keys()]);
      }, T);

      test('runs up to `concurrency` handlers at once', async () => {
        const { stream, prefix } = await freshStream();
        let running = 0;
        let peak = 0;
        let done = 0;
        await consume({ stream, durable: 'd', concurrency: 3 }, async () => {
          peak = Math.max(peak, ++running);
          await sleep(150);
          running--;
          done++;
        });
        for (let i = 0; i < 7; i++) await bus.publish(`${prefix}.a`, enc(String(i)));
        await waitFor('7 handled', () => done >= 7);
        expect(peak).toBe(3);
      }, T);

      test('splits a durable between its consumers without duplicates', async () => {
        const { stream, prefix } = await freshStream();
        const byMember: string[][] = [[], []];
        for (const k of [0, 1]) {
          await consume({ stream, durable: 'group' }, async (m) => {
            byMember[k]!.push(dec(m.data));
            await sleep(15);
          });
        }
        const n = 30;
        for (let i = 0; i < n; i++) await bus.publish(`${prefix}.w`, enc(String(i)));
        await waitFor(`${n} handled`, () => byMember[0]!.length + byMember[1]!.length >= n);
        await sleep(300);
        const all = [...byMember[0]!, ...byMember[1]!];
        expect(all).toHaveLength(n);
        expect(new Set(all).size).toBe(n);
        expect(byMember[0]!.length).toBeGreaterThan(0);
        expect(byMember[1]!.length).toBeGreaterThan(0);
      }, T);

      test('stop() waits for in-flight handlers', async () => {
        const { stream, prefix } = await freshStream();
        let started = false;
        let finished = false;
        const sub = await consume({ stream, durable: 'd' }, async () => {
          started = true;
          await sleep(300);
          finished = true;
        });
        await bus.publish(`${prefix}.a`, enc('x'));
        await waitFor('the handler', () => started);
        await sub.stop();
        expect(finished).toBe(true);
      }, T);

      test('a restarted durable resumes after its acks and gets the unacked again', async () => {
        const { stream, prefix } = await freshStream();
        for (let i = 1; i <= 3; i++) await bus.publish(`${prefix}.r`, enc(String(i)));
        const first: string[] = [];
        const g = gate();
        const spec = { stream, durable: 'restart', backoffMs: [100] };
        const sub = await consume(spec, async (m) => {
          first.push(dec(m.data));
          if (dec(m.data) === '3') {
            await g.wait;
            throw new Error('stopping');
          }
        });
        await waitFor('message 3 in flight', () => first.length >= 3);
        const stopped = sub.stop();
        g.open();
        await stopped;
        for (let i = 4; i <= 5; i++) await bus.publish(`${prefix}.r`, enc(String(i)));
        await sleep(200);
        expect(first).toEqual(['1', '2', '3']);

        const again: Array<[string, number]> = [];
        await consume(spec, async (m) => void again.push([dec(m.data), m.deliveryCount]));
        await waitFor('3 messages after restart', () => again.length >= 3, 8000);
        await sleep(300);
        expect(again.map(([d]) => d).sort()).toEqual(['3', '4', '5']);
        expect(again.find(([d]) => d === '3')![1]).toBe(2);
      }, T);
    });

    describe('request/reply', () => {
      test('round-trips a request', async () => {
        const subject = `rr${Math.random().toString(36).slice(2, 10)}.echo`;
        subs.push(bus.respond(subject, 'svc', async (data, subj) => enc(`${subj}:${dec(data).toUpperCase()}`)));
        const out = await bus.request(subject, enc('hi'), { timeoutMs: 2000 });
        expect(dec(out)).toBe(`${subject}:HI`);
      }, T);

      test('hands the request\'s application headers to the responder, none of the bus\'s own', async () => {
        const subject = `rr${Math.random().toString(36).slice(2, 10)}.hdr`;
        const seen: (Readonly<Record<string, string>> | undefined)[] = [];
        subs.push(bus.respond(subject, 'svc', async (data, _s, headers) => {
          seen.push(headers);
          return data;
        }));
        const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
        // With liveness asked for, the bus adds a header of its own: the handler does not see it.
        expect(dec(await bus.request(subject, enc('a'), { timeoutMs: 2000, idleTimeoutMs: 1000, headers: { traceparent } }))).toBe('a');
        expect(dec(await bus.request(subject, enc('b'), { timeoutMs: 2000, idleTimeoutMs: 1000 }))).toBe('b');
        expect(seen).toEqual([{ traceparent }, undefined]);
        await expect(bus.request(subject, enc(''), { timeoutMs: 2000, headers: { 'Dws-Progress': '1' } })).rejects.toThrow(/reserved/);
      }, T);

      test('times out when nobody answers in time', async () => {
        const subject = `rr${Math.random().toString(36).slice(2, 10)}.slow`;
        subs.push(bus.respond(subject, 'svc', async () => {
          await sleep(1000);
          return enc('late');
        }));
        const t0 = Date.now();
        await expect(bus.request(subject, enc(''), { timeoutMs: 200 })).rejects.toMatchObject({ code: 'timeout' });
        expect(Date.now() - t0).toBeLessThan(900);
      }, T);

      test('fails fast with no_responders', async () => {
        const t0 = Date.now();
        await expect(
          bus.request(`rr${Math.random().toString(36).slice(2, 10)}.none`, enc(''), { timeoutMs: 3000 }),
        ).rejects.toMatchObject({ code: 'no_responders' });
        expect(Date.now() - t0).toBeLessThan(1000);
      }, T);

      test('shares a queue group between responders, one answer per request', async () => {
        const subject = `rr${Math.random().toString(36).slice(2, 10)}.q`;
        const hits = [0, 0];
        for (const k of [0, 1]) {
          subs.push(bus.respond(subject, 'workers', async () => {
            hits[k]!++;
            return enc(String(k));
          }));
        }
        for (let i = 0; i < 20; i++) await bus.request(subject, enc(''), { timeoutMs: 2000 });
        expect(hits[0]! + hits[1]!).toBe(20);
        expect(hits[0]).toBeGreaterThan(0);
        expect(hits[1]).toBeGreaterThan(0);
      }, T);

      test('with idleTimeoutMs, a handler that runs for several idle windows still answers', async () => {
        const subject = `rr${Math.random().toString(36).slice(2, 10)}.long`;
        let calls = 0;
        subs.push(bus.respond(subject, 'svc', async (data) => {
          calls++;
          await sleep(2500);
          return enc(`done:${dec(data)}`);
        }));
        const t0 = Date.now();
        // Windows wide enough that a loaded CI machine's stalls (380 ms seen) do not pass for silence.
        const out = await bus.request(subject, enc('x'), { timeoutMs: 8000, idleTimeoutMs: 800 });
        expect(dec(out)).toBe('done:x');
        expect(Date.now() - t0).toBeGreaterThanOrEqual(2500);
        expect(calls).toBe(1);
        // A fast answer, and a throw after some progress, come back as themselves.
        subs.push(bus.respond(`${subject}.fast`, 'svc', async () => enc('quick')));
        expect(dec(await bus.request(`${subject}.fast`, enc(''), { idleTimeoutMs: 300 }))).toBe('quick');
        subs.push(bus.respond(`${subject}.err`, 'svc', async () => {
          await sleep(500);
          throw Object.assign(new Error('late failure'), { code: 'late', status: 409 });
        }));
        await expect(bus.request(`${subject}.err`, enc(''), { idleTimeoutMs: 200 })).rejects.toMatchObject({
          code: 'remote',
          remote: { code: 'late', status: 409 },
        });
      }, T);

      test('timeoutMs still bounds a request whose responder keeps reporting progress', async () => {
        const subject = `rr${Math.random().toString(36).slice(2, 10)}.endless`;
        subs.push(bus.respond(subject, 'svc', async () => {
          await sleep(5000);
          return enc('too late');
        }));
        const t0 = Date.now();
        // Idle windows of 800 ms: a loaded CI machine stalled a 200 ms one (it timed out at 279 ms, on the idle window).
        await expect(bus.request(subject, enc(''), { timeoutMs: 2000, idleTimeoutMs: 800 })).rejects.toMatchObject({ code: 'timeout' });
        const took = Date.now() - t0;
        expect(took).toBeGreaterThanOrEqual(1950);
        expect(took).toBeLessThan(4000);
      }, T);

      test('refuses an idleTimeoutMs too short to carry progress', async () => {
        const subject = `rr${Math.random().toString(36).slice(2, 10)}.bad`;
        subs.push(bus.respond(subject, 'svc', async () => enc('')));
        await expect(bus.request(subject, enc(''), { idleTimeoutMs: 10 })).rejects.toThrow(/idleTimeoutMs/);
      }, T);

      const separate = opts.separateResponder;
      (separate ? test : test.skip)('a responder that dies mid-handler fails the request within about idleTimeoutMs', async () => {
        const subject = `rr${Math.random().toString(36).slice(2, 10)}.doomed`;
        const doomed = await separate!(subject);
        const idleTimeoutMs = 1000;
        let settled = false;
        const pending = bus.request(subject, enc(''), { timeoutMs: 60_000, idleTimeoutMs }).finally(() => (settled = true));
        pending.catch(() => undefined);
        try {
          await doomed.handling;
          // Alive for well past one idle window: its progress keeps the request pending.
          await sleep(2.5 * idleTimeoutMs);
          expect(settled).toBe(false);
        } finally {
          doomed.kill();
        }
        const killedAt = Date.now();
        const err = await pending.then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err).toMatchObject({ code: 'timeout', message: expect.stringMatching(/went silent/) });
        const after = Date.now() - killedAt;
        // Silence is counted from the last beat (at most a third of the window before the kill).
        expect(after).toBeLessThan(idleTimeoutMs + 1500);
        expect(after).toBeGreaterThanOrEqual(idleTimeoutMs / 2);
      }, T);

      test('propagates a responder throw promptly as a remote error', async () => {
        const subject = `rr${Math.random().toString(36).slice(2, 10)}.err`;
        subs.push(bus.respond(subject, 'svc', async () => {
          throw Object.assign(new Error('run not found'), { code: 'run_not_found', status: 404 });
        }));
        const t0 = Date.now();
        const err = await bus.request(subject, enc(''), { timeoutMs: 5000 }).catch((e: unknown) => e);
        expect(Date.now() - t0).toBeLessThan(1000);
        expect(err).toMatchObject({ code: 'remote', message: 'run not found', remote: { code: 'run_not_found', status: 404 } });
      }, T);
    });

    describe('emit/subscribe', () => {
      test('fans out by wildcard, asynchronously, and stops on stop()', async () => {
        const p = `ev${Math.random().toString(36).slice(2, 10)}`;
        const got: Record<string, string[]> = { star: [], gt: [], exact: [] };
        let emitted = false;
        let inline = false;
        const on = (k: string) => (_: Uint8Array, subject: string) => {
          if (!emitted) inline = true;
          got[k]!.push(subject);
        };
        const star = bus.subscribe(`${p}.*.x`, on('star'));
        const gt = bus.subscribe(`${p}.>`, on('gt'));
        const exact = bus.subscribe(`${p}.a.x`, on('exact'));
        subs.push(star, gt, exact);
        for (const s of ['a.x', 'b.x', 'b.y', 'a.x.z']) bus.emit(`${p}.${s}`, enc(s));
        bus.emit(`other${p}.a.x`, enc(''));
        emitted = true;
        await waitFor('all events', () => got.gt!.length >= 4 && got.star!.length >= 2 && got.exact!.length >= 1);
        await sleep(200);
        expect(inline).toBe(false);
        expect(got.star).toEqual([`${p}.a.x`, `${p}.b.x`]);
        expect(got.gt).toEqual([`${p}.a.x`, `${p}.b.x`, `${p}.b.y`, `${p}.a.x.z`]);
        expect(got.exact).toEqual([`${p}.a.x`]);

        await gt.stop();
        bus.emit(`${p}.a.x`, enc(''));
        await waitFor('the exact subscriber', () => got.exact!.length >= 2);
        await sleep(200);
        expect(got.gt).toHaveLength(4);
      }, T);
    });

    describe('large payloads', () => {
      // Over NATS's default max_payload (1 MiB), the JetStream adapter ships these by claim check.
      const big = (seed: number, size = 2.5 * 1024 * 1024) => {
        const b = new Uint8Array(size);
        for (let i = 0; i < b.length; i++) b[i] = (i * 31 + seed) & 0xff;
        return b;
      };
      const same = (a: Uint8Array, b: Uint8Array) => a.length === b.length && Buffer.from(a).equals(Buffer.from(b));

      test('a request and its reply cross intact, both ways', async () => {
        const subject = `rr${Math.random().toString(36).slice(2, 10)}.big`;
        const req = big(1);
        subs.push(bus.respond(subject, 'svc', async (data) => (same(data, req) ? big(2, 3 * 1024 * 1024) : enc('mismatch'))));
        const out = await bus.request(subject, req, { timeoutMs: 10_000 });
        expect(same(out, big(2, 3 * 1024 * 1024))).toBe(true);
        // And a small reply to a big request, a big reply to a small one.
        subs.push(bus.respond(`${subject}.len`, 'svc', async (data, _s, headers) => enc(`${data.length} ${headers?.traceparent}`)));
        // A spilled request keeps its application headers.
        expect(dec(await bus.request(`${subject}.len`, big(3), { timeoutMs: 10_000, headers: { traceparent: 'tp' } }))).toBe(`${2.5 * 1024 * 1024} tp`);
      }, T);

      test('a stream message is stored and delivered intact, redelivery included', async () => {
        const { stream, id, prefix } = await freshStream();
        const payload = big(4);
        const seen: Uint8Array[] = [];
        await consume({ stream, durable: `d${id}`, backoffMs: [10] }, async (m) => {
          seen.push(m.data);
          if (seen.length === 1) throw new Error('first delivery fails');
        });
        await bus.publish(`${prefix}.big`, payload, { msgId: 'big-1' });
        await bus.publish(`${prefix}.small`, enc('after'));
        await waitFor('redelivery and the next message', () => seen.length >= 3, 15_000);
        // The redelivery may come before or after the next message (it waits out its backoff).
        expect(seen.filter((d) => same(d, payload))).toHaveLength(2);
        expect(seen.filter((d) => dec(d) === 'after')).toHaveLength(1);
      }, T);

      test('emits keep their order around a large one', async () => {
        const p = `ev${Math.random().toString(36).slice(2, 10)}`;
        const got: number[] = [];
        subs.push(bus.subscribe(`${p}.>`, (data) => got.push(data.length)));
        bus.emit(`${p}.a`, enc('1'));
        bus.emit(`${p}.a`, big(5));
        bus.emit(`${p}.a`, enc('22'));
        await waitFor('three emits', () => got.length >= 3, 10_000);
        expect(got).toEqual([1, 2.5 * 1024 * 1024, 2]);
      }, T);
    });

    describe('lifecycle', () => {
      test('is healthy until closed, then refuses work', async () => {
        const b = await makeBus();
        expect(await b.healthy()).toBe(true);
        await b.close();
        expect(await b.healthy()).toBe(false);
        await expect(b.publish('x.y', enc(''))).rejects.toMatchObject({ code: 'closed' });
        await b.close();
      }, T);
    });
  });
}
