import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { createLogger } from '@dws/log';
import type { Outbox } from '@dws/runtime';
import { recordingDb, uniqueName } from '@dws/testing';
import type { Admission } from '../src/handlers/admission.js';
import { Timers } from '../src/handlers/timers.js';
import { modes, sleep, startHarness, until, type Harness, type Started } from './harness.js';

jest.setTimeout(60_000);

const scheduledAt = (s: Started) => Date.parse(s.input.scheduledAt as string);

describe.each(modes())('cron (%s)', (mode) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(mode);
  }, 60_000);
  afterAll(() => h?.close());

  it('polls with one statement, outside any transaction, while nothing is due', async () => {
    // First in the file: no schedule, debounce or batch exists yet.
    const { db, calls } = recordingDb(h.db);
    // Nothing is due, so neither the outbox nor admission is reached.
    const timers = new Timers({ db, log: createLogger({ level: 'silent' }), outbox: {} as Outbox, admission: {} as Admission, takeInDelayed: async () => 0 });
    await timers.poll(); // the first poll also prunes old gate and tick rows
    calls.length = 0;
    expect(await timers.poll()).toBe(0);
    expect(calls).toEqual(['query']);
  });

  it('fires every tick exactly once across three replicas, then once for all ticks missed while every replica was down', async () => {
    const a = await h.replica();
    const b = await h.replica();
    const app = uniqueName('cron');
    const runsOf = () => [...h.starts.values()].filter((s) => s.cmd.app === app);
    await h.register(app, [{ name: 'every-second', triggers: [{ cron: '* * * * * *' }] }]);
    await until(() => runsOf().length >= 4, 10_000, 'four ticks');

    for (const s of runsOf()) {
      expect(s.cmd).toMatchObject({ workflow: 'every-second', triggerKind: 'cron', eventId: '', eventName: '', workspaceId: h.ws });
      expect(s.input).toEqual({ cron: '* * * * * *', scheduledAt: expect.any(String) });
    }
    // One run per tick, every tick from the first on (no duplicates, no gaps).
    const ticks = runsOf().map(scheduledAt).sort((x, y) => x - y);
    expect(new Set(ticks).size).toBe(ticks.length);
    for (let i = 1; i < ticks.length; i++) expect(ticks[i]! - ticks[i - 1]!).toBe(1000);

    // Down across several ticks: b crashes (its connections cut mid-poll), a and the primary stop.
    await b.crash();
    await a.stop();
    await h.primary.stop();
    await sleep(300); // anything in flight lands
    const before = runsOf().length;
    const lastBefore = Math.max(...runsOf().map(scheduledAt));
    const downAt = Date.now();
    await sleep(3500);
    const c = await h.replica();
    const upAt = Date.now();
    // The missed ticks fire as ONE run, for the first tick missed.
    await until(() => runsOf().length >= before + 1, 5000, 'the catch-up run');
    await sleep(mode === 'real' ? 1500 : 1200);
    const after = runsOf().filter((s) => scheduledAt(s) > lastBefore);
    const missed = after.filter((s) => scheduledAt(s) < upAt - 1000);
    expect(missed).toHaveLength(1);
    expect(scheduledAt(missed[0]!)).toBe(lastBefore + 1000);
    expect(scheduledAt(missed[0]!)).toBeLessThan(downAt + 1000);
    // Then it ticks on, once per second, no tick twice.
    const all = runsOf().map(scheduledAt);
    expect(new Set(all).size).toBe(all.length);
    expect(after.length).toBeGreaterThanOrEqual(2);
    await c.stop();
    // The database holds one tick row per fired tick.
    const rows = await h.db.query<{ n: string }>('select count(*)::text as n from ingest.cron_ticks where app = $1', [app]);
    expect(Number(rows[0]!.n)).toBe(runsOf().length);
  });

  it('reads time zones from a TZ= prefix or a tz field, keeps a schedule across re-registration, and drops a removed one', async () => {
    const h2 = h;
    const r = await h2.replica();
    try {
      const app = uniqueName('tz');
      await h2.register(app, [
        { name: 'paris', triggers: [{ cron: 'TZ=Europe/Paris 0 9 * * *' }] },
        { name: 'tokyo', triggers: [{ cron: '30 8 * * 1', tz: 'Asia/Tokyo' }] },
      ]);
      const rows = await h2.db.query<{ workflow: string; cron: string; tz: string; next_at: Date | string }>(
        'select workflow, cron, tz, next_at from ingest.cron_schedules where app = $1 order by workflow',
        [app],
      );
      expect(rows.map((x) => [x.workflow, x.cron, x.tz])).toEqual([
        ['paris', 'TZ=Europe/Paris 0 9 * * *', 'Europe/Paris'],
        ['tokyo', 'TZ=Asia/Tokyo 30 8 * * 1', 'Asia/Tokyo'],
      ]);
      const paris = new Date(rows[0]!.next_at);
      const local = new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Paris', hour: '2-digit', minute: '2-digit', hour12: false }).format(paris);
      expect(local).toBe('09:00');
      const tokyo = new Date(rows[1]!.next_at);
      expect(new Intl.DateTimeFormat('en-GB', { timeZone: 'Asia/Tokyo', weekday: 'short', hour: '2-digit', minute: '2-digit', hour12: false }).format(tokyo)).toBe('Mon 08:30');
      // Re-registering the same triggers leaves the next tick where it was; a removed trigger's schedule goes.
      await h2.db.query(`update ingest.cron_schedules set next_at = next_at + interval '1 day' where app = $1 and workflow = 'paris'`, [app]);
      await h2.register(app, [
        { name: 'paris', triggers: [{ cron: 'TZ=Europe/Paris 0 9 * * *' }] },
        { name: 'tokyo', triggers: [{ event: 'not.cron.anymore' }] },
      ]);
      const again = await h2.db.query<{ workflow: string; next_at: Date | string }>('select workflow, next_at from ingest.cron_schedules where app = $1', [app]);
      expect(again).toHaveLength(1);
      expect(new Date(again[0]!.next_at).getTime()).toBe(paris.getTime() + 86_400_000);
    } finally {
      await r.stop();
    }
  });

  it('refuses cron runs of a suspended workspace (the tick is recorded, nothing starts), and resumes after', async () => {
    const c = await h.replica();
    try {
      const ws = uniqueName('ws');
      const app = uniqueName('susp');
      await h.suspend(ws, true);
      await h.register(app, [{ name: 'tick', triggers: [{ cron: '* * * * * *' }] }], ws);
      await until(async () => {
        const rows = await h.db.query('select 1 from ingest.cron_ticks where workspace_id = $1 and run_id = $2', [ws, '']);
        return rows.length >= 2;
      }, 10_000, 'refused ticks');
      expect([...h.starts.values()].filter((s) => s.cmd.workspaceId === ws)).toHaveLength(0);
      await h.suspend(ws, false);
      await until(() => [...h.starts.values()].some((s) => s.cmd.workspaceId === ws), 5000, 'a run after unsuspending');
    } finally {
      await c.stop();
    }
  });
});
