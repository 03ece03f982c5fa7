import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { create, fromBinary, RouteReplySchema, RouteRequestSchema, toBinary } from '@dws/proto';
import { unseal } from '@dws/protocol';
import { sealKeyFor, subjects } from '@dws/runtime';
import { uniqueName } from '@dws/testing';
import { modes, startHarness, type Harness, type Workspace } from './harness.js';

/**
 * invoker.route: the invoker tells the scheduler when a pass may skip its hop
 * (every live runner able to take it is a serve runner) and hands over the
 * addresses and the signing key, sealed under the fleet's seal key.
 */
describe.each(modes())('invoker on %s: direct routes for the scheduler', (mode) => {
  let h: Harness;
  let ws: Workspace;
  beforeAll(async () => {
    h = await startHarness(mode);
    ws = await h.workspace();
  }, 60_000);
  afterAll(async () => {
    await h?.close();
  }, 30_000);

  const route = async (app: string, workflow: string, runner = '') =>
    fromBinary(RouteReplySchema, await h.bus.request(subjects.route, toBinary(RouteRequestSchema, create(RouteRequestSchema, { workspaceId: ws.id, app, workflow, runner })), { timeoutMs: 5000 }));

  it('names every capable serve runner, with the signing key sealed under SERVICE_SEAL_KEY', async () => {
    const app = uniqueName('direct');
    const a = await h.serveRunner(ws, (r) => r.workflow('w', async () => 'a'), { app, runnerId: 'runner-a' });
    const b = await h.serveRunner(ws, (r) => r.workflow('w', async () => 'b'), { app, runnerId: 'runner-b' });
    await h.serveRunner(ws, (r) => r.workflow('other', async () => 'c'), { app, runnerId: 'runner-c' });
    const reply = await route(app, 'w');
    expect(reply.direct).toBe(true);
    expect(reply.ttlMs).toBeGreaterThan(0);
    expect(reply.targets.map((t) => [t.runnerId, t.url]).sort()).toEqual([['runner-a', a.url], ['runner-b', b.url]]);
    expect(unseal(reply.sealedSigningKey, sealKeyFor(h.cfg))).toBe(ws.signingKey);
    // Pinned: only that runner.
    const pinned = await route(app, 'w', 'runner-b');
    expect(pinned.targets.map((t) => t.runnerId)).toEqual(['runner-b']);
  });

  it('says "not direct" when no runner can take the pass (the invoker path answers no_runner)', async () => {
    const app = uniqueName('nobody');
    expect((await route(app, 'w')).direct).toBe(false);
    await h.serveRunner(ws, (r) => r.workflow('w', async () => 'a'), { app, runnerId: 'runner-a' });
    expect((await route(app, 'w', 'runner-gone')).direct).toBe(false);
    expect((await route(app, 'unknown-workflow')).direct).toBe(false);
  });
});
