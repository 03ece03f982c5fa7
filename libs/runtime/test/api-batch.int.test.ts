import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { connectJetStreamBus, createEmbeddedBus, prefixedBus, type Bus, type Subscription } from '@dws/bus';
import { createLogger } from '@dws/log';
import { ApiReplySchema, ApiRequestSchema, create, fromBinary, toBinary } from '@dws/proto';
import { ServiceError } from '@dws/protocol';
import { testInfra, uniqueName } from '@dws/testing';
import { ApiBatcher, apiSubject, callApi, serveApi, type ApiCall, type Caller } from '../src/api.js';

const log = createLogger({ level: 'silent' });
const infra = testInfra();
if (!infra && process.env.CI) throw new Error('TEST_NATS_URL is not set');

/** The bus, with the subjects of every request it makes recorded: what tells a batch from single calls. */
function counted(bus: Bus): { bus: Bus; requests: string[] } {
  const requests: string[] = [];
  const proxy = new Proxy(bus, {
    get(target, prop, receiver) {
      if (prop === 'request') return (subject: string, data: Uint8Array, opts?: never) => (requests.push(subject), target.request(subject, data, opts));
      const v = Reflect.get(target, prop, receiver) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return { bus: proxy, requests };
}

const caller = (requestId: string, traceparent?: string): Caller => ({
  workspaceId: 'ws_1', actor: 'key_1', keyKind: 'secret', requestId, ...(traceparent ? { traceparent } : {}),
});

/** Calls started from callbacks of their own in one turn, as requests read together off their sockets. */
function inOneTurn<T>(n: number, fn: (i: number) => Promise<T>): Promise<PromiseSettledResult<T>[]> {
  return new Promise((resolve) => {
    const all: Promise<T>[] = [];
    for (let i = 0; i < n; i++) {
      setImmediate(() => {
        all.push(fn(i));
        if (all.length === n) resolve(Promise.allSettled(all));
      });
    }
  });
}

describe.each([
  ['NATS', async () => prefixedBus(await connectJetStreamBus({ servers: infra!.natsUrl }), uniqueName('apibatch'))],
  ['embedded', async () => createEmbeddedBus()],
] as const)('ApiBatcher and serveApi on the %s bus', (kind, open) => {
  const run = kind === 'embedded' || infra ? it : it.skip;
  let bus: Bus;
  let served: Subscription;
  const seen: ApiCall[] = [];

  beforeAll(async () => {
    if (kind === 'NATS' && !infra) return;
    bus = await open();
    served = serveApi(bus, 'svc', log, {
      async echo(call) {
        seen.push(call);
        return { status: 202, body: { got: call.body, requestId: call.caller.requestId }, headers: { 'x-n': String(call.params.n) } };
      },
      async refuse() {
        throw new ServiceError(409, 'conflict_here', 'Not this one.');
      },
      async crash() {
        throw new Error('a bug');
      },
    });
  });
  afterAll(async () => {
    await served?.stop();
    await bus?.close();
  });

  run('sends the calls of a busy turn in one request, and answers each as it would alone', async () => {
    const c = counted(bus);
    const batcher = new ApiBatcher(c.bus);
    await batcher.call('svc', 'echo', caller('warm'), { params: { n: '0' }, rawBody: '{}' }); // a call has just left: not a quiet moment
    c.requests.length = 0;
    const ops = ['echo', 'refuse', 'echo', 'crash', 'nothing', 'echo'];
    const out = await inOneTurn(ops.length, (i) =>
      batcher.call('svc', ops[i]!, caller(`req_${i}`, i === 2 ? '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' : undefined), {
        params: { n: String(i) },
        rawBody: JSON.stringify({ i }),
      }),
    );
    expect(c.requests.filter((s) => s.endsWith('svc.api.batch')).length).toBeGreaterThanOrEqual(1);
    expect(c.requests.length).toBeLessThanOrEqual(2);
    const value = (i: number) => (out[i] as PromiseFulfilledResult<{ status: number; bodyJson?: string; headers: Record<string, string> }>).value;
    const reason = (i: number) => (out[i] as PromiseRejectedResult).reason as ServiceError;
    for (const i of [0, 2, 5]) {
      expect(value(i).status).toBe(202);
      expect(JSON.parse(value(i).bodyJson!)).toEqual({ got: { i }, requestId: `req_${i}` });
      expect(value(i).headers).toEqual({ 'x-n': String(i) });
    }
    expect([reason(1).status, reason(1).code]).toEqual([409, 'conflict_here']);
    expect([reason(3).status, reason(3).code]).toEqual([500, 'internal']);
    expect([reason(4).status, reason(4).code]).toEqual([404, 'route_not_found']);
    // Each call's trace context reaches its handler, in a batch as alone.
    expect(seen.find((s) => s.caller.requestId === 'req_2')?.caller.traceparent).toBe('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01');
    expect(seen.find((s) => s.caller.requestId === 'req_0')?.caller.traceparent).toBeUndefined();
  });

  run('sends a call of a quiet moment on its own, on the subject every version answers', async () => {
    const c = counted(bus);
    const batcher = new ApiBatcher(c.bus);
    await new Promise((r) => setTimeout(r, 5));
    const res = await batcher.call('svc', 'echo', caller('alone'), { params: { n: '7' }, rawBody: '{"a":1}' });
    expect(JSON.parse(res.bodyJson!)).toEqual({ got: { a: 1 }, requestId: 'alone' });
    expect(c.requests).toEqual([expect.stringMatching(/svc\.api$/)]);
  });

  run('calls a service that has no batch subject (an older one, mid-upgrade) one call at a time', async () => {
    // What an older serveApi answered: the single subject only.
    const old = bus.respond(apiSubject('old'), 'old', async (data) => {
      const req = fromBinary(ApiRequestSchema, data);
      return toBinary(ApiReplySchema, create(ApiReplySchema, { status: 200, body: new TextEncoder().encode(JSON.stringify({ requestId: req.requestId })) }));
    });
    try {
      const c = counted(bus);
      const batcher = new ApiBatcher(c.bus);
      await callApi(bus, 'old', 'x', caller('warm'), {});
      await batcher.call('old', 'x', caller('warm'), {});
      const out = await inOneTurn(5, (i) => batcher.call('old', 'x', caller(`old_${i}`), {}));
      expect(out.map((r) => (r.status === 'fulfilled' ? JSON.parse(r.value.bodyJson!) : r.reason))).toEqual(
        [0, 1, 2, 3, 4].map((i) => ({ requestId: `old_${i}` })),
      );
      expect(c.requests.some((s) => s.endsWith('old.api.batch'))).toBe(true);
      // From then on, one call at a time with no batch tried first.
      c.requests.length = 0;
      await inOneTurn(3, () => batcher.call('old', 'x', caller('again'), {}));
      expect(c.requests.filter((s) => s.endsWith('old.api.batch'))).toEqual([]);
      expect(c.requests.length).toBe(3);
    } finally {
      await old.stop();
    }
  });
});
