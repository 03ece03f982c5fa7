import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { fromBinary, WorkflowsRegisteredSchema, type WorkflowsRegistered } from '@dws/proto';
import { streams, subjects } from '@dws/runtime';
import { uniqueName } from '@dws/testing';
import type { Runner } from '@dws/sdk';
import { modes, startHarness, until, type Harness, type Workspace } from './harness.js';

const dec = new TextDecoder();
const define = (r: Runner) => {
  r.workflow('charge', { triggers: [{ event: 'shop/order' }, { cron: '0 * * * *' }] }, async () => 1);
  r.workflow('refund', async () => 2);
};

// POST /v1/workflows/pause and /resume: kept by the invoker, announced to ingest inside the workflow's config.
describe.each(modes())('workflow pause on %s', (mode) => {
  let h: Harness;
  let ws: Workspace;
  /** Every WorkflowsRegistered fact published, in order. */
  const facts: WorkflowsRegistered[] = [];
  let stopFacts: () => Promise<void>;
  beforeAll(async () => {
    h = await startHarness(mode);
    ws = await h.workspace();
    await h.bus.ensureStream(streams.invokerFacts);
    const sub = await h.bus.consume({ stream: streams.invokerFacts.name, durable: uniqueName('facts'), filterSubject: subjects.workflowsRegistered }, async (msg) => {
      facts.push(fromBinary(WorkflowsRegisteredSchema, msg.data));
    });
    stopFacts = () => sub.stop();
  }, 60_000);
  afterAll(async () => {
    await stopFacts?.();
    await h?.close();
  }, 30_000);

  /** The config of `workflow` in the app's latest fact. */
  const announced = (app: string, workflow: string) => {
    const last = facts.filter((f) => f.workspaceId === ws.id && f.app === app).sort((a, b) => Number(a.version - b.version)).at(-1);
    const def = last?.workflows.find((w) => w.name === workflow);
    return def && (JSON.parse(dec.decode(def.config)) as Record<string, unknown>);
  };
  const listed = async (app: string, name: string) =>
    ((await h.call(ws, 'workflows.list', { query: { app } })).body as { name: string; paused?: unknown }[]).find((w) => w.name === name);

  it('pauses a workflow until resumed, keeps the pause across registrations, and announces it in its config', async () => {
    const app = uniqueName('shop');
    const runner = await h.serveRunner(ws, define, { runnerId: 'r1', app });
    try {
      const paused = await h.call(ws, 'workflows.pause', { body: { app, workflow: 'charge' } });
      expect(paused.status).toBe(200);
      expect(paused.body).toMatchObject({ name: 'charge', app, paused: { at: expect.any(String), by: ws.caller.actor } });
      expect(await listed(app, 'charge')).toMatchObject({ paused: { by: ws.caller.actor } });
      expect((await listed(app, 'refund'))!.paused).toBeUndefined();
      await until('the pause announced', () => (announced(app, 'charge')?.paused ? true : undefined));
      expect(announced(app, 'charge')!.paused).toMatchObject({ by: ws.caller.actor });
      expect(announced(app, 'refund')!.paused).toBeUndefined();

      // Pausing again changes nothing; a registration (every heartbeat) keeps it.
      const at = (paused.body as { paused: { at: string } }).paused.at;
      expect((await h.call(ws, 'workflows.pause', { body: { app, workflow: 'charge' } })).body.paused.at).toBe(at);
      const before = facts.length;
      await h.serveRunner(ws, define, { runnerId: 'r2', app });
      expect((await listed(app, 'charge'))!.paused).toMatchObject({ at });
      expect(facts.length).toBe(before);

      const resumed = await h.call(ws, 'workflows.resume', { body: { app, workflow: 'charge' } });
      expect(resumed.body.paused).toBeUndefined();
      await until('the resume announced', () => (announced(app, 'charge') && !announced(app, 'charge')!.paused ? true : undefined));
    } finally {
      await runner.close();
    }
  });

  it('pauses with hold, announced as paused.hold; paused again, it keeps its time and takes the new hold', async () => {
    const app = uniqueName('shop');
    const runner = await h.serveRunner(ws, define, { runnerId: 'r1', app });
    try {
      const held = await h.call(ws, 'workflows.pause', { body: { app, workflow: 'charge', hold: true } });
      expect(held.body.paused).toEqual({ at: expect.any(String), by: ws.caller.actor, hold: true });
      await until('the hold announced', () => ((announced(app, 'charge')?.paused as { hold?: boolean } | undefined)?.hold ? true : undefined));

      const skipping = await h.call(ws, 'workflows.pause', { body: { app, workflow: 'charge' } });
      expect(skipping.body.paused).toEqual({ at: held.body.paused.at, by: ws.caller.actor });
      await until('the hold lifted', () => {
        const p = announced(app, 'charge')?.paused as { hold?: boolean } | undefined;
        return p && !p.hold ? true : undefined;
      });
      await expect(h.call(ws, 'workflows.pause', { body: { app, workflow: 'charge', hold: 'yes' } })).rejects.toMatchObject({ status: 400, code: 'invalid_body' });
      await h.call(ws, 'workflows.resume', { body: { app, workflow: 'charge' } });
    } finally {
      await runner.close();
    }
  });

  it("refuses a workflow the app does not register (404) and a body without app and workflow (400); a runner's own `paused` is not a pause", async () => {
    const app = uniqueName('shop');
    const runner = await h.serveRunner(ws, define, { runnerId: 'r1', app });
    try {
      await expect(h.call(ws, 'workflows.pause', { body: { app, workflow: 'nope' } })).rejects.toMatchObject({ status: 404 });
      await expect(h.call(ws, 'workflows.pause', { body: { app: uniqueName('other'), workflow: 'charge' } })).rejects.toMatchObject({ status: 404 });
      await expect(h.call(ws, 'workflows.resume', { body: { workflow: 'charge' } })).rejects.toMatchObject({ status: 400, code: 'invalid_body' });
      // A new workflow beside it, so this registration is announced.
      const raw = { app, url: runner.url, runner: 'r3', workflows: [{ name: 'charge', paused: { at: 'x', by: 'me' } }, { name: 'refund' }, { name: 'extra' }] };
      expect((await h.call(ws, 'register', { body: raw })).status).toBe(200);
      await until('its registration announced', () => (announced(app, 'extra') ? true : undefined));
      expect(announced(app, 'charge')!.paused).toBeUndefined();
      expect((await listed(app, 'charge'))!.paused).toBeUndefined();
    } finally {
      await runner.close();
    }
  });
});
