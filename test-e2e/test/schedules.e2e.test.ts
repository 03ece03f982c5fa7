import { beforeAll, describe, expect, it } from '@jest/globals';
import { setTimeout as sleep } from 'node:timers/promises';
import { isApiError } from '@dws/sdk';
import { eventually } from '../src/api.js';
import { e2eModes, useClientFixture } from '../src/client-fixture.js';

const modes = e2eModes();

/**
 * Schedules made through the public API with the SDK's client: one per
 * tenant, each tick a run of the workflow with the schedule's data, replaced
 * by its externalId, gone once deleted.
 */
describe.each(modes)('schedules through the API on %s', (mode) => {
  const fx = useClientFixture(mode, (r) => {
    r.workflow<{ scheduleId: string; externalId?: string; data: { tenant: string } }>('digest', async ({ event, step }) =>
      step.run('send', () => `digest for ${event.data.data.tenant} (${event.data.externalId})`),
    );
  });

  beforeAll(async () => {
    await eventually('the workflow registered', async () => ((await fx.client.workflows.list()).some((w) => w.name === 'digest') ? true : undefined));
  }, 60_000);

  it('starts a run per tick with its data, is replaced by its externalId, and starts none once deleted', async () => {
    const made = await fx.client.schedules.create({ app: 'default', workflow: 'digest', cron: '* * * * * *', data: { tenant: 'acme' }, externalId: 'tenant-acme' });
    expect(made).toMatchObject({ workflow: 'digest', timezone: 'UTC', externalId: 'tenant-acme', nextRunAt: expect.any(String) });
    const ticks = async () => {
      const runs = (await fx.client.runs.list({ workflow: 'digest', runType: 'cron', limit: 200 })).runs;
      return Promise.all(runs.map((r) => fx.client.runs.get<string>(r.id)));
    };
    const done = await eventually('a tick run succeeded', async () => {
      const ok = (await ticks()).filter((r) => r.status === 'succeeded');
      return ok.length > 0 ? ok : undefined;
    }, 30_000);
    expect(done[0]).toMatchObject({ triggerKind: 'cron', input: { scheduleId: made.id, externalId: 'tenant-acme', data: { tenant: 'acme' } }, result: 'digest for acme (tenant-acme)' });

    const again = await fx.client.schedules.create({ app: 'default', workflow: 'digest', cron: '* * * * * *', data: { tenant: 'acme-pro' }, externalId: 'tenant-acme' });
    expect(again.id).toBe(made.id);
    await eventually('a tick with the new data', async () => ((await ticks()).some((r) => r.result === 'digest for acme-pro (tenant-acme)') ? true : undefined), 30_000);
    expect((await fx.client.schedules.list({ workflow: 'digest' })).map((s) => s.id)).toEqual([made.id]);

    await fx.client.schedules.delete(made.id);
    const gone = await fx.client.schedules.get(made.id).catch((e: unknown) => e);
    expect(isApiError(gone) && gone.status).toBe(404);
    await sleep(500);
    const count = (await ticks()).length;
    await sleep(2500);
    expect((await ticks()).length).toBe(count);
  }, 90_000);

  it('refuses a bad pattern (400) and a workflow that is not registered (404)', async () => {
    const bad = await fx.client.schedules.create({ app: 'default', workflow: 'digest', cron: 'daily' }).catch((e: unknown) => e);
    expect(isApiError(bad) && [bad.status, bad.code]).toEqual([400, 'invalid_schedule']);
    const missing = await fx.client.schedules.create({ app: 'default', workflow: 'nope', cron: '0 9 * * *' }).catch((e: unknown) => e);
    expect(isApiError(missing) && [missing.status, missing.code]).toEqual([404, 'workflow_not_found']);
  }, 30_000);
});
