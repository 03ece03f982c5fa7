import { beforeAll, describe, expect, it } from '@jest/globals';
import { isApiError } from '@dws/sdk';
import { setTimeout as sleep } from 'node:timers/promises';
import { eventually } from '../src/api.js';
import { e2eModes, useClientFixture } from '../src/client-fixture.js';

const modes = e2eModes();

/**
 * Events sent with a `delay`, through the public API with the SDK's client:
 * stored until their time, listed and cancellable meanwhile, then taken in
 * as though sent then (their runs start, their waiters wake).
 */
describe.each(modes)('delayed events on %s', (mode) => {
  const fx = useClientFixture(mode, (r) => {
    r.workflow<{ n: number }>('delayed-flow', { triggers: [{ event: 'delayed.go' }] }, async ({ event, step }) => {
      const at = await step.run('at', () => Date.now());
      return { n: event.data.n, at };
    });
    r.workflow('delayed-emitter', { triggers: [{ event: 'delayed.emit' }] }, async ({ step }) =>
      step.emit('later', { name: 'delayed.go', data: { n: 9 }, delay: '1500ms' }),
    );
    r.workflow('delayed-waiter', { triggers: [{ event: 'delayed.wait' }] }, async ({ step }) => {
      const ack = await step.waitForEvent<{ by: string }>('ack', { event: 'delayed.ack', timeout: '2m' });
      return { by: ack?.data.by ?? null };
    });
  });

  beforeAll(async () => {
    // The workflows are registered once an event starts a run of one.
    const probe = await eventually('a run of delayed.go', async () => {
      const r = await fx.client.send({ name: 'delayed.go', data: { n: 0 } });
      return r.runId ? r : undefined;
    });
    await fx.client.runs.wait(probe.runId!, { timeoutMs: 30_000 });
  }, 60_000);

  const runsOf = async (eventId: string) => (await fx.client.runs.list({ eventId })).runs;

  it('starts its run at its time, not before, and lists it as scheduled meanwhile', async () => {
    const sent = await fx.client.send({ name: 'delayed.go', data: { n: 1 }, delay: '2s' });
    expect(sent).toMatchObject({ scheduled: true, triggered: [], deduped: false });
    expect(sent.runId).toBeUndefined();
    const due = Date.parse(sent.scheduledFor!);
    expect(await fx.client.events.get(sent.id)).toMatchObject({ id: sent.id, name: 'delayed.go', scheduled: true, scheduledFor: sent.scheduledFor, triggered: [] });
    expect((await fx.client.events.scheduled({ name: 'delayed.go' })).map((e) => e.id)).toContain(sent.id);
    expect(await runsOf(sent.id)).toEqual([]);

    const [run] = await eventually('the delayed run', async () => {
      const runs = await runsOf(sent.id);
      return runs.length > 0 ? runs : undefined;
    }, 30_000);
    const done = await fx.client.runs.wait<{ n: number; at: number }>(run!.id, { timeoutMs: 30_000 });
    expect(done).toMatchObject({ status: 'succeeded', eventId: sent.id, input: { n: 1 } });
    expect(done.result!.at).toBeGreaterThanOrEqual(due);
    expect(await runsOf(sent.id)).toHaveLength(1);
    const taken = await fx.client.events.get(sent.id);
    expect(taken).toMatchObject({ id: sent.id, triggered: [{ workflow: 'delayed-flow', runId: run!.id }] });
    // Taken in: no longer scheduled, its record keeps when it was due.
    expect(taken).toMatchObject({ scheduledFor: sent.scheduledFor });
    expect(taken.scheduled).toBeUndefined();
    expect((await fx.client.events.scheduled({ name: 'delayed.go' })).map((e) => e.id)).not.toContain(sent.id);
  }, 60_000);

  it('is dropped by a cancel before its time, and a cancel after it is a 409', async () => {
    const sent = await fx.client.send({ name: 'delayed.go', data: { n: 2 }, delay: new Date(Date.now() + 1500) });
    expect(sent.scheduled).toBe(true);
    expect(await fx.client.events.cancel(sent.id)).toMatchObject({ id: sent.id, cancelled: true, data: { n: 2 } });
    await sleep(2500);
    expect(await runsOf(sent.id)).toEqual([]);
    const gone = await fx.client.events.get(sent.id).catch((e: unknown) => e);
    expect(isApiError(gone) && gone.status).toBe(404);

    const now = await fx.client.send({ name: 'delayed.go', data: { n: 3 } });
    const late = await fx.client.events.cancel(now.id).catch((e: unknown) => e);
    expect(isApiError(late) && [late.status, late.code]).toEqual([409, 'event_not_scheduled']);
    const bad = await fx.client.send({ name: 'delayed.go', delay: 'tomorrow' }).catch((e: unknown) => e);
    expect(isApiError(bad) && [bad.status, bad.code]).toEqual([400, 'invalid_event']);
  }, 60_000);

  it('wakes a waiting run at its time, not before', async () => {
    const started = await fx.client.send({ name: 'delayed.wait' });
    await eventually('the waiter waiting', async () => ((await fx.client.runs.get(started.runId!)).status === 'waiting' ? true : undefined), 30_000);
    const ack = await fx.client.send({ name: 'delayed.ack', data: { by: 'ada' }, delay: 1500 });
    expect(ack).toMatchObject({ scheduled: true, woke: 0 });
    await sleep(700);
    expect((await fx.client.runs.get(started.runId!)).status).toBe('waiting');
    const done = await fx.client.runs.wait<{ by: string }>(started.runId!, { timeoutMs: 30_000 });
    expect(done).toMatchObject({ status: 'succeeded', result: { by: 'ada' } });
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(ack.scheduledFor!));
    expect(await fx.client.events.get(ack.id)).toMatchObject({ woke: 1 });
  }, 60_000);

  it('emits from a workflow for later: the emitting run ends now, the event starts its run at its time', async () => {
    const started = await fx.client.send({ name: 'delayed.emit' });
    const emitter = await fx.client.runs.wait<{ id: string; scheduledFor: string }>(started.runId!, { timeoutMs: 30_000 });
    expect(emitter.status).toBe('succeeded');
    const { id, scheduledFor } = emitter.result!;
    expect(Date.now()).toBeLessThan(Date.parse(scheduledFor));
    expect(await fx.client.events.get(id)).toMatchObject({ id, name: 'delayed.go', source: 'emit', scheduledFor, triggered: [] });
    expect(await runsOf(id)).toEqual([]);
    const [run] = await eventually('the run of the delayed emit', async () => {
      const runs = await runsOf(id);
      return runs.length > 0 ? runs : undefined;
    }, 30_000);
    const done = await fx.client.runs.wait<{ n: number; at: number }>(run!.id, { timeoutMs: 30_000 });
    expect(done).toMatchObject({ status: 'succeeded', workflow: 'delayed-flow', input: { n: 9 } });
    expect(done.result!.at).toBeGreaterThanOrEqual(Date.parse(scheduledFor));
  }, 60_000);
});
