import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { create, toBinary, WorkflowsRegisteredSchema } from '@dws/proto';
import { subjects } from '@dws/runtime';
import { uniqueName } from '@dws/testing';
import { modes, startHarness, type Harness } from './harness.js';

jest.setTimeout(60_000);

const enc = new TextEncoder();

/**
 * The versioned registration (what the invoker sends before it answers a
 * register): applied over older versions only, it replaces the app's whole
 * set, and every replica's cached index sees it on the next event.
 */
describe.each(modes())('registration read-your-writes (%s)', (mode) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(mode);
    if (mode === 'real') await h.replica(); // two replicas answer events and applies
  }, 60_000);
  afterAll(() => h?.close());

  const apply = (app: string, version: number, workflows: Record<string, unknown>[]) =>
    h.bus.request(
      subjects.applyWorkflowsIngest,
      toBinary(
        WorkflowsRegisteredSchema,
        create(WorkflowsRegisteredSchema, {
          workspaceId: h.ws,
          app,
          runnerId: 'r1',
          url: 'http://runner/invoke',
          version: BigInt(version),
          workflows: workflows.map((w) => ({ name: w.name as string, config: enc.encode(JSON.stringify(w)) })),
        }),
      ),
    );
  const matched = async (name: string) => ((await h.send({ name })).body.triggered as { workflow: string }[]).map((t) => t.workflow);

  it('the next event matches each new version, and the replaced set no longer does', async () => {
    const app = uniqueName('ryw');
    for (let v = 1; v <= 20; v++) {
      await apply(app, v, [{ name: 'moving', triggers: [{ event: `${app}.v${v}` }] }]);
      expect(await matched(`${app}.v${v}`)).toEqual(['moving']);
      if (v > 1) expect(await matched(`${app}.v${v - 1}`)).toEqual([]);
    }
    // A workflow left out of the set is gone; an older version arriving late changes nothing.
    await apply(app, 21, [{ name: 'other', triggers: [{ event: `${app}.other` }] }]);
    await apply(app, 20, [{ name: 'moving', triggers: [{ event: `${app}.v20` }] }]);
    expect(await matched(`${app}.v20`)).toEqual([]);
    expect(await matched(`${app}.other`)).toEqual(['other']);
    const rows = await h.db.query<{ name: string }>('select name from ingest.workflows where workspace_id = $1 and app = $2', [h.ws, app]);
    expect(rows.map((r) => r.name)).toEqual(['other']);
  });

  it('drops the cron schedules of a workflow the app no longer declares', async () => {
    const app = uniqueName('rywcron');
    await apply(app, 1, [{ name: 'nightly', triggers: [{ cron: '0 3 * * *' }] }, { name: 'plain' }]);
    const schedules = () =>
      h.db.query<{ workflow: string }>('select workflow from ingest.cron_schedules where workspace_id = $1 and app = $2', [h.ws, app]);
    expect((await schedules()).map((r) => r.workflow)).toEqual(['nightly']);
    await apply(app, 2, [{ name: 'plain' }]);
    expect(await schedules()).toEqual([]);
  });
});
