import { describe, expect, it } from '@jest/globals';
import type { ApiCall, Caller } from '@dws/runtime';
import { ingestTogetherApi } from './api.js';
import { RecordedUnsettled, type Incoming, type IngestResult, type Ingestor } from './ingestor.js';

/** An ingestor that records each call and answers every event with its name as its id (or fails as told). */
function recording(fail?: (items: Incoming[]) => Error | undefined) {
  const calls: { caller: Caller; names: string[]; dedupeIds: (string | undefined)[] }[] = [];
  const ingestor = {
    async ingest(caller: Caller, items: Incoming[]): Promise<IngestResult[]> {
      calls.push({ caller, names: items.map((i) => i.ev.name), dedupeIds: items.map((i) => i.ev.dedupeId) });
      const err = fail?.(items);
      if (err) throw err;
      return items.map((i) => ({ id: i.ev.name, woke: 0, triggered: [], skipped: false, dropped: false, debounced: false, batched: false, deduped: false, suspended: false }));
    },
  } as unknown as Ingestor;
  return { calls, together: ingestTogetherApi({ ingestor })['events.ingest']! };
}

const caller = (extra: Partial<Caller> = {}): Caller => ({ workspaceId: 'ws_1', actor: 'key_1', keyKind: 'secret', requestId: 'r', via: 'api', ...extra });
const post = (body: unknown, c: Partial<Caller> = {}, headers: Record<string, string> = {}): ApiCall => ({ caller: caller(c), params: {}, query: {}, body, headers });
const value = (r: PromiseSettledResult<unknown>) => (r as PromiseFulfilledResult<{ status: number; body: unknown }>).value;
const reason = (r: PromiseSettledResult<unknown>) => (r as PromiseRejectedResult).reason as { status?: number; code?: string };

describe('POST /events calls of one batch, taken together', () => {
  it('ingests the POSTs of one caller in one call and answers each with its own events', async () => {
    const { calls, together } = recording();
    const out = await together([post({ name: 'a' }), post([{ name: 'b' }, { name: '' }, { name: 'c' }]), post({ name: '' }), post('text'), post({ name: 'd' })]);
    expect(calls.map((c) => c.names)).toEqual([['a', 'b', 'c', 'd']]);
    expect(value(out[0]!)).toMatchObject({ status: 202, body: { id: 'a' } });
    expect(value(out[1]!)).toMatchObject({ status: 202, body: { results: [{ id: 'b' }, { error: { code: 'invalid_event' } }, { id: 'c' }] } });
    expect([reason(out[2]!).status, reason(out[2]!).code]).toEqual([400, 'invalid_event']);
    expect([reason(out[3]!).status, reason(out[3]!).code]).toEqual([400, 'invalid_event']);
    expect(value(out[4]!)).toMatchObject({ status: 202, body: { id: 'd' } });
  });

  it('keeps apart what differs in workspace, key, channel or standing, and a call with a trace of its own', async () => {
    const { calls, together } = recording();
    await together([
      post({ name: 'a' }),
      post({ name: 'b' }, { workspaceId: 'ws_2' }),
      post({ name: 'c' }, { suspended: true }),
      post({ name: 'd' }, { actor: 'key_2' }),
      post({ name: 'e' }, { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' }),
      post({ name: 'f' }),
      post({ name: 'g' }, { via: 'mcp' }),
    ]);
    expect(calls.map((c) => c.names.join('')).sort()).toEqual(['af', 'b', 'c', 'd', 'e', 'g']);
    expect(calls.find((c) => c.names[0] === 'c')!.caller.suspended).toBe(true);
  });

  it("takes a POST's Idempotency-Key as its events' dedupeId (a batch's i-th `<key>:<i>`), and refuses an event naming its own beside it", async () => {
    const { calls, together } = recording();
    const key = { 'idempotency-key': 'k1' };
    const out = await together([
      post({ name: 'a' }, {}, key),
      post([{ name: 'b' }, { name: 'c', dedupeId: 'own' }, { name: 'd' }], {}, key),
      post({ name: 'e', dedupeId: 'own' }, {}, key),
      post({ name: 'f', dedupeId: 'own' }),
    ]);
    expect(calls.map((c) => c.dedupeIds)).toEqual([['k1', 'k1:0', 'k1:2', 'own']]);
    expect(value(out[1]!)).toMatchObject({ body: { results: [{ id: 'b' }, { error: { code: 'invalid_event', message: expect.stringMatching(/dedupeId/) } }, { id: 'd' }] } });
    expect([reason(out[2]!).status, reason(out[2]!).code]).toEqual([400, 'invalid_event']);
  });

  it('takes at most a transaction of events per call', async () => {
    const { calls, together } = recording();
    const hundred = (p: string) => post(Array.from({ length: 100 }, (_, i) => ({ name: `${p}${i}` })));
    const out = await together(['a', 'b', 'c', 'd', 'e', 'f', 'g'].map(hundred));
    expect(calls.map((c) => c.names.length)).toEqual([500, 200]);
    expect((value(out[6]!).body as { results: { id: string }[] }).results[99]!.id).toBe('g99');
  });

  it('tries each POST alone when the shared call failed with nothing stored, and only the one that fails alone fails', async () => {
    const { calls, together } = recording((items) => (items.some((i) => i.ev.name === 'bad') ? new Error('a row Postgres refused') : undefined));
    const out = await together([post({ name: 'a' }), post({ name: 'bad' }), post({ name: 'c' })]);
    expect(calls.map((c) => c.names)).toEqual([['a', 'bad', 'c'], ['a'], ['bad'], ['c']]);
    expect(value(out[0]!)).toMatchObject({ body: { id: 'a' } });
    expect(out[1]!.status).toBe('rejected');
    expect(value(out[2]!)).toMatchObject({ body: { id: 'c' } });
  });

  it('fails every POST of a shared call whose events were stored but not settled, and records none of them again', async () => {
    const { calls, together } = recording(() => new RecordedUnsettled(new Error('outbox write failed')));
    const out = await together([post({ name: 'a' }), post({ name: 'b' })]);
    expect(calls).toHaveLength(1);
    expect(out.map((r) => r.status)).toEqual(['rejected', 'rejected']);
  });
});
