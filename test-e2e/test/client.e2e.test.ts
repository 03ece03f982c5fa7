import { describe, expect, it } from '@jest/globals';
import { isApiError, type TimelineFrame } from '@dws/sdk';
import { eventually } from '../src/api.js';
import { e2eModes, useClientFixture } from '../src/client-fixture.js';

const modes = e2eModes();

/**
 * The SDK's REST client (`createClient`) against the deployment, through
 * the public API only: send events, follow a run's stream to its end,
 * read, page, control and replay runs, and the API's refusals as ApiError.
 */
describe.each(modes)('the SDK client on %s', (mode) => {
  const fx = useClientFixture(mode, (r) => {
    r.workflow<{ n: number }>('client-flow', { triggers: [{ event: 'fx.client.go' }] }, async ({ event, step, logger }) => {
      logger.info('doubling', { n: event.data.n });
      const doubled = await step.run('double', () => event.data.n * 2);
      return { doubled };
    });
    r.workflow<{ k: string }>('client-waiter', { triggers: [{ event: 'fx.client.wait' }] }, async ({ event, step }) => {
      const go = await step.waitForEvent<{ v: number }>('go', { event: 'fx.client.go-on', timeout: '2m', if: `event.data.k == '${event.data.k}'` });
      return { v: go?.data.v };
    });
    r.workflow('client-sleeper', { triggers: [{ event: 'fx.client.sleep' }] }, async ({ step }) => {
      await step.run('first', () => 1);
      await step.sleep('long', '1h');
      return 2;
    });
  });

  const status = (id: string, want: string) =>
    eventually(`${id} ${want}`, async () => ((await fx.client.runs.get(id)).status === want ? true : undefined), 60_000);

  it("sends an event, follows its run's stream to its end and reads the run, its steps and its event", async () => {
    const sent = await eventually('a run of fx.client.go', async () => {
      const r = await fx.client.send({ name: 'fx.client.go', data: { n: 21 } });
      return r.runId ? r : undefined;
    });
    const frames: TimelineFrame[] = [];
    for await (const f of fx.client.runs.stream(sent.runId!)) frames.push(f);
    expect(frames.map((f) => f.seq)).toEqual(frames.map((_, i) => i + 1));
    expect(frames.at(-1)).toMatchObject({ kind: 'run_status', status: 'succeeded', runId: sent.runId });
    expect(frames).toContainEqual(expect.objectContaining({ kind: 'log', message: 'doubling', fields: { n: 21 } }));
    expect(frames).toContainEqual(expect.objectContaining({ kind: 'step_status', name: 'double', status: 'succeeded' }));

    const run = await fx.client.runs.wait<{ doubled: number }>(sent.runId!, { timeoutMs: 30_000 });
    expect(run).toMatchObject({ id: sent.runId, status: 'succeeded', workflow: 'client-flow', eventId: sent.id, input: { n: 21 }, result: { doubled: 42 } });
    expect((await fx.client.runs.steps(sent.runId!)).map((s) => [s.name, s.status, s.output])).toEqual([['double', 'succeeded', 42]]);
    expect(await fx.client.events.get(sent.id)).toMatchObject({ id: sent.id, name: 'fx.client.go' });
    expect((await fx.client.runs.list({ eventId: sent.id })).runs.map((r) => r.id)).toEqual([sent.runId]);
  }, 60_000);

  it('waits for a run to end (GET /runs/{id}/wait held by the service), and is answered as the run is once timeoutMs has passed', async () => {
    const k = `${mode}-${Date.now()}`;
    const id = (await fx.client.send({ name: 'fx.client.wait', data: { k } })).runId!;
    await expect(fx.client.runs.wait(id, { timeoutMs: 300 })).rejects.toMatchObject({ name: 'TimeoutError' });
    const raw = async (query: string) => {
      const res = await fetch(`${fx.dep.base}/v1/runs/${id}/wait${query}`, { headers: { authorization: `Bearer ${fx.dep.publicKey}` } });
      return { status: res.status, body: (await res.json()) as { status: string; result?: unknown; error?: { code: string } } };
    };
    const t0 = Date.now();
    const asIs = await raw('?timeoutMs=400');
    expect(asIs.status).toBe(200);
    expect(['queued', 'running', 'waiting']).toContain(asIs.body.status);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(350);
    expect((await raw('?timeoutMs=later')).body.error?.code).toBe('invalid_timeoutms');

    // Both waits are held while the run waits for its event; its end answers them.
    const held = [fx.client.runs.wait<{ v: number }>(id, { timeoutMs: 30_000 }), raw('?timeoutMs=30000')];
    await new Promise((r) => setTimeout(r, 300));
    await fx.client.send({ name: 'fx.client.go-on', data: { k, v: 7 } });
    const [viaSdk, viaHttp] = (await Promise.all(held)) as [Awaited<ReturnType<typeof fx.client.runs.wait>>, Awaited<ReturnType<typeof raw>>];
    expect(viaSdk).toMatchObject({ id, status: 'succeeded', result: { v: 7 } });
    expect(viaHttp.body).toMatchObject({ status: 'succeeded', result: { v: 7 } });
    const missing = await fetch(`${fx.dep.base}/v1/runs/run_01jzzzzzzzzzzzzzzzzzzzzzzz/wait?timeoutMs=0`, { headers: { authorization: `Bearer ${fx.dep.secretKey}` } });
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { code: string } }).error.code).toBe('run_not_found');
  }, 60_000);

  it('sends a batch, and under an idempotency key (sent again: deduped), and pages through the runs with the cursor', async () => {
    const results = await fx.client.sendMany([{ name: 'fx.client.go', data: { n: 1 } }, { name: '' }, { name: 'fx.client.go', data: { n: 2 } }, { name: 'fx.client.go', data: { n: 3 } }]);
    expect(results[1]).toMatchObject({ error: { code: 'invalid_event' } });
    const ids = results.flatMap((r) => ('runId' in r && r.runId ? [r.runId] : []));
    expect(ids).toHaveLength(3);
    for (const id of ids) expect((await fx.client.runs.wait(id, { timeoutMs: 30_000 })).status).toBe('succeeded');
    const key = `client-batch-${mode}-${Date.now()}`;
    const keyed = await fx.client.sendMany([{ name: 'fx.client.go', data: { n: 4 } }], { idempotencyKey: key });
    expect(keyed[0]).toMatchObject({ deduped: false, runId: expect.any(String) });
    expect((await fx.client.sendMany([{ name: 'fx.client.go', data: { n: 4 } }], { idempotencyKey: key }))[0]).toMatchObject({ deduped: true });
    expect((await fx.client.send({ name: 'fx.client.go', data: { n: 5 } }, { idempotencyKey: key })).deduped).toBe(false);
    expect((await fx.client.send({ name: 'fx.client.go', data: { n: 5 } }, { idempotencyKey: key })).deduped).toBe(true);
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await fx.client.runs.list({ workflow: 'client-flow', limit: 2, cursor });
      expect(page.runs.length).toBeLessThanOrEqual(2);
      seen.push(...page.runs.map((r) => r.id));
      cursor = page.nextCursor;
    } while (cursor);
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen).toEqual(expect.arrayContaining(ids));
    const all: string[] = [];
    for await (const r of fx.client.runs.all({ workflow: 'client-flow', limit: 2 })) all.push(r.id);
    expect(all).toEqual(seen);
  }, 60_000);

  it('pauses, resumes and cancels a run, replays it once per key, and throws what the API refuses as ApiError', async () => {
    const id = (await fx.client.send({ name: 'fx.client.sleep' })).runId!;
    await status(id, 'waiting');
    expect((await fx.client.runs.pause(id)).status).toBe('paused');
    expect((await fx.client.runs.pause(id)).status).toBe('paused');
    expect((await fx.client.runs.resume(id)).status).toBe('queued');
    await status(id, 'waiting');
    expect((await fx.client.runs.cancel(id)).status).toBe('cancelled');
    const refused = await fx.client.runs.cancel(id).catch((e: unknown) => e);
    expect(isApiError(refused) && [refused.status, refused.code]).toEqual([409, 'run_terminal']);

    const key = `client-${mode}-${id}`;
    const first = await fx.client.runs.replay(id, { idempotencyKey: key });
    const again = await fx.client.runs.replay(id, { idempotencyKey: key });
    expect(again.id).toBe(first.id);
    const other = await fx.client.runs.replay(id);
    expect(other.id).not.toBe(first.id);
    expect((await fx.client.runs.list({ replayOf: id })).runs.map((r) => r.id).sort()).toEqual([first.id, other.id].sort());
    for (const r of [first.id, other.id]) {
      await status(r, 'waiting');
      await fx.client.runs.cancel(r);
    }
    await expect(fx.client.runs.get('run_00000000000000000000000000')).rejects.toMatchObject({ status: 404, code: 'run_not_found' });
    await expect(fx.client.runs.retryFromStep(id, 'nope')).rejects.toMatchObject({ status: 404, code: 'step_not_found' });
  }, 90_000);
});
