import { beforeAll, describe, expect, it } from '@jest/globals';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient, isApiError, type Client } from '@dws/sdk';
import { eventually } from '../src/api.js';
import { e2eModes, useClientFixture } from '../src/client-fixture.js';

const modes = e2eModes();

/**
 * Pausing a workflow through the public API with the SDK's client: its
 * events start no run while paused, a run under way goes on to its end,
 * other workflows are untouched, and once resumed its events start runs;
 * paused with hold, the events it held start theirs once it is resumed.
 */
describe.each(modes)('workflow pause on %s', (mode) => {
  const fx = useClientFixture(mode, (r) => {
    r.workflow<{ n: number }>('pausable', { triggers: [{ event: 'pause.go' }] }, async ({ event, step }) => {
      await step.run('first', () => event.data.n);
      await step.sleep('nap', '1500ms');
      return step.run('second', () => event.data.n * 2);
    });
    r.workflow('bystander', { triggers: [{ event: 'pause.go' }] }, async ({ step }) => step.run('only', () => 'ok'));
  });
  const ref = { app: 'default', workflow: 'pausable' };

  beforeAll(async () => {
    await eventually('the workflows registered', async () => ((await fx.client.workflows.list()).some((w) => w.name === 'pausable') ? true : undefined));
  }, 60_000);

  const runOf = async (eventId: string, workflow: string) => (await fx.client.runs.list({ eventId, workflow })).runs[0];

  it('starts no run of a paused workflow, lets its run under way finish, and starts runs again once resumed', async () => {
    const before = await fx.client.send({ name: 'pause.go', data: { n: 1 } });
    const underWay = before.triggered.find((t) => t.workflow === 'pausable')!.runId;
    await eventually('the run under way asleep', async () => ((await fx.client.runs.get(underWay)).status === 'waiting' ? true : undefined), 30_000);

    const paused = await fx.client.workflows.pause(ref);
    expect(paused).toMatchObject({ name: 'pausable', paused: { at: expect.any(String), by: expect.any(String) } });
    expect((await fx.client.workflows.list()).find((w) => w.name === 'pausable')!.paused).toEqual(paused.paused);
    expect((await fx.client.workflows.list()).find((w) => w.name === 'bystander')!.paused).toBeUndefined();

    const during = await fx.client.send({ name: 'pause.go', data: { n: 2 } });
    expect(during.triggered).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ workflow: 'pausable', paused: true }),
        expect.objectContaining({ workflow: 'bystander', runId: expect.any(String) }),
      ]),
    );
    expect(during.triggered.find((t) => t.workflow === 'pausable')!.runId).toBeUndefined();
    expect((await fx.client.runs.wait(during.triggered.find((t) => t.workflow === 'bystander')!.runId, { timeoutMs: 30_000 })).status).toBe('succeeded');
    // The run under way wakes from its sleep and ends while the workflow is paused.
    expect(await fx.client.runs.wait<number>(underWay, { timeoutMs: 30_000 })).toMatchObject({ status: 'succeeded', result: 2 });
    await sleep(300);
    expect(await runOf(during.id, 'pausable')).toBeUndefined();

    const resumed = await fx.client.workflows.resume(ref);
    expect(resumed.paused).toBeUndefined();
    const after = await fx.client.send({ name: 'pause.go', data: { n: 3 } });
    const again = after.triggered.find((t) => t.workflow === 'pausable')!.runId;
    expect(again).toEqual(expect.any(String));
    expect(await fx.client.runs.wait<number>(again, { timeoutMs: 30_000 })).toMatchObject({ status: 'succeeded', result: 6 });
  }, 90_000);

  it('paused with hold, starts the runs of the events it held once resumed, oldest first', async () => {
    const held = await fx.client.workflows.pause({ ...ref, hold: true });
    expect(held.paused).toMatchObject({ hold: true });
    const sent: Awaited<ReturnType<Client['send']>>[] = [];
    for (const n of [10, 20]) sent.push(await fx.client.send({ name: 'pause.go', data: { n }, tags: ['held'] }));
    for (const s of sent) expect(s.triggered).toEqual(expect.arrayContaining([expect.objectContaining({ workflow: 'pausable', paused: true, held: true })]));
    await sleep(500);
    for (const s of sent) expect(await runOf(s.id, 'pausable')).toBeUndefined();
    // What the resume will admit, oldest first.
    expect((await fx.client.events.held(ref)).map((h) => h.event.id)).toEqual(sent.map((s) => s.id));

    await fx.client.workflows.resume(ref);
    const runs = await eventually('the held runs', async () => {
      const found = await Promise.all(sent.map((s) => runOf(s.id, 'pausable')));
      return found.every(Boolean) ? found.map((r) => r!) : undefined;
    }, 30_000);
    expect(runs[0]!.createdAt <= runs[1]!.createdAt).toBe(true);
    for (const [i, r] of runs.entries()) {
      expect(await fx.client.runs.wait<number>(r.id, { timeoutMs: 30_000 })).toMatchObject({ status: 'succeeded', result: [20, 40][i], tags: ['held'] });
    }
    // The event's record names its run, as though it had started it then.
    expect((await fx.client.events.get(sent[0]!.id)).triggered).toEqual(expect.arrayContaining([expect.objectContaining({ workflow: 'pausable', runId: runs[0]!.id })]));
  }, 90_000);

  it('refuses an unknown workflow (404) and a public key (403)', async () => {
    const unknown = await fx.client.workflows.pause({ app: 'default', workflow: 'nope' }).catch((e: unknown) => e);
    expect(isApiError(unknown) && unknown.status).toBe(404);
    const reader = createClient({ url: `${fx.dep.base}/v1`, apiKey: fx.dep.publicKey, env: {} });
    const refused = await reader.workflows.pause(ref).catch((e: unknown) => e);
    expect(isApiError(refused) && refused.status).toBe(403);
  }, 30_000);
});
