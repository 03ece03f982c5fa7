import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { uniqueName } from '@dws/testing';
import { modes, startHarness, type Harness, type Workspace } from './harness.js';

/**
 * An invoke right after a registration reaches the new runner on every
 * invoker replica, even one whose cached list of the app's runners was
 * empty a moment before (it re-reads on a miss instead of trusting the cache);
 * and a pass that comes before the gateway's WorkspaceUpserted (a fresh
 * fleet) waits for the workspace's key.
 */
describe.each(modes())('invoker on %s: routing after a registration', (mode) => {
  let h: Harness;
  let ws: Workspace;
  beforeAll(async () => {
    h = await startHarness(mode, { keyWaitMs: 1500 });
    await h.replica({ keyWaitMs: 1500 });
    ws = await h.workspace();
  }, 60_000);
  afterAll(async () => {
    await h?.close();
  }, 30_000);

  it('a replica that just saw no runner routes to one registered since', async () => {
    for (let i = 0; i < 6; i++) {
      const app = uniqueName('fresh');
      // Both replicas (the queue group spreads the requests) cache "no runner" for the app.
      for (let k = 0; k < 4; k++) expect((await h.invoke(ws, { app, workflow: 'w' })).outcome).toBe('no_runner');
      const r = await h.serveRunner(ws, (x) => x.workflow('w', async () => 'hi'), { app });
      try {
        for (let k = 0; k < 4; k++) {
          const out = await h.invoke(ws, { app, workflow: 'w' });
          expect(out).toMatchObject({ outcome: 'reply', status: 200 });
        }
      } finally {
        await r.close();
      }
    }
  });

  it("a pass that comes before the workspace's key waits for it instead of failing", async () => {
    const late = await h.workspace(undefined, false);
    const app = uniqueName('late');
    await h.serveRunner(late, (x) => x.workflow('w', async () => 'hi'), { app });
    const pass = h.invoke(late, { app, workflow: 'w' });
    await new Promise((r) => setTimeout(r, 300));
    await h.announce(late);
    expect(await pass).toMatchObject({ outcome: 'reply', status: 200 });
  });

  it('a pass for a workspace whose key never comes fails as a transport error once the wait is over', async () => {
    const never = await h.workspace(undefined, false);
    const app = uniqueName('never');
    await h.serveRunner(never, (x) => x.workflow('w', async () => 'hi'), { app });
    const t0 = Date.now();
    expect(await h.invoke(never, { app, workflow: 'w' })).toMatchObject({ outcome: 'transport_error', error: expect.stringContaining('signing key is not known') });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1500);
  });
});
