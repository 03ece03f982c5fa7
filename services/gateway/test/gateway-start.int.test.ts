import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { infraAvailable, startTestGateway, type TestGateway } from './harness.js';

if (!infraAvailable) console.warn('\n!!! Postgres/NATS missing: gateway start tests SKIPPED !!!\n');
const d = infraAvailable ? describe : describe.skip;

// What a Postgres restart or failover does to a gateway starting at that moment: the connection
// its bootstrap transaction runs on is terminated (57P01 here; 57P02 or a reset socket on a crash).
d('gateway start through a lost connection', () => {
  let g: TestGateway;
  beforeAll(async () => {
    g = await startTestGateway();
  }, 30_000);
  afterAll(() => g?.stop());

  it('runs its bootstrap again on a new connection and serves', async () => {
    const db = g.tdb.db;
    // Holding the bootstrap's lock parks the new replica's transaction where the test can find it.
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let locked!: () => void;
    const lockHeld = new Promise<void>((r) => (locked = r));
    const holding = db.tx(async (tx) => {
      await tx.query(`select pg_advisory_xact_lock(hashtext('dws-gateway-bootstrap'))`);
      locked();
      await released;
    });
    await lockHeld;
    const starting = g.replica();
    const parkedOn = () =>
      db.query<{ pid: number }>(
        `select pid from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query like '%dws-gateway-bootstrap%'`,
      );
    let parked = await parkedOn();
    for (let i = 0; parked.length === 0 && i < 200; i++) {
      await new Promise((r) => setTimeout(r, 50));
      parked = await parkedOn();
    }
    expect(parked).toHaveLength(1);
    await db.query('select pg_terminate_backend($1)', [parked[0]!.pid]);
    release();
    await holding;

    const replica = await starting;
    g.stub('scheduler', { 'runs.list': async () => ({ body: { data: [] } }) });
    // Authenticated by the keys its bootstrap read, and forwarded.
    const res = await request(`${replica.base}/v1/runs?limit=1`, { headers: { authorization: `Bearer ${g.secretKey}` } });
    expect(res.statusCode).toBe(200);
    expect(await res.body.json()).toEqual({ data: [] });
  }, 30_000);
});
