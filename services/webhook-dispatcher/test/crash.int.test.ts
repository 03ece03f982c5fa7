import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { testInfra } from '@dws/testing';
import { FAST, harness, until, type Harness } from './harness.js';

jest.setTimeout(90_000);
const here = path.dirname(fileURLToPath(import.meta.url));
const LEASE_MS = 1500;

/** A dispatcher in a child process (via tsx), to be SIGKILLed as a crashed replica would die. */
async function doomed(h: Harness): Promise<ChildProcess> {
  const tsx = createRequire(import.meta.url).resolve('tsx');
  const child = spawn(process.execPath, ['--import', tsx, path.join(here, 'dispatcher-process.ts'), h.dbUrl!, testInfra()!.natsUrl, h.busPrefix, String(LEASE_MS)], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', () => out.includes('ready\n') && resolve());
    child.once('exit', (code, signal) => reject(new Error(`dispatcher process exited (${code ?? signal}) before ready:\n${out}`)));
  });
  return child;
}

// Two processes share one Postgres and one NATS: the embedded adapters live in one process, so real only.
(testInfra() ? describe : describe.skip)('kill -9 of the dispatcher mid-delivery (real)', () => {
  let h: Harness;
  let child: ChildProcess | undefined;
  beforeAll(async () => {
    h = await harness('real', FAST, false);
  });
  afterAll(async () => {
    child?.kill('SIGKILL');
    await h?.close();
  });

  it('loses nothing: the held delivery is retried after the lease, a fact published meanwhile is delivered', async () => {
    child = await doomed(h);
    const url = h.receiver.script('/crash', ['hold', 200]);
    const e = (await h.call('endpoints.create', { body: { url, eventKinds: ['run.succeeded'] } })).body;
    await h.runFinished({ runId: 'run_crash_1' });
    // The partner has the request in hand and has not answered: the worst moment to die.
    await until(() => h.receiver.at('/crash').length === 1, 10_000, 'the doomed dispatcher to POST');
    const [held] = await h.deliveriesOf('run_crash_1', 1);
    expect(held).toMatchObject({ status: 'delivering', attempt_count: 0 });
    child.kill('SIGKILL');
    await new Promise((r) => child!.once('exit', r));
    await h.runFinished({ runId: 'run_crash_2' });

    await h.start(FAST);
    const first = await h.delivery(held.id, ['succeeded'], 15_000);
    // NATS may hand that fact to the dead replica's still-open pull before it notices the
    // connection is gone; then it comes back after the consumer's ack wait (30 s), not at once.
    const [second] = await h.deliveriesOf('run_crash_2', 1, 45_000);
    await h.delivery(second.id, ['succeeded']);
    // The attempt the dead replica made was never recorded, so it is re-sent (same delivery id: the partner can dedupe).
    const got = h.receiver.at('/crash').map((r) => r.headers['x-service-delivery-id']);
    expect(got.filter((id) => id === held.id)).toHaveLength(2);
    expect(got.filter((id) => id === second.id)).toHaveLength(1);
    expect(first.attempt_count).toBe(1);
    const attempts = await h.db.query<{ attempt: number; outcome: string }>('select attempt, outcome from webhook_dispatcher.attempts where delivery_id = $1', [held.id]);
    expect(attempts).toEqual([{ attempt: 1, outcome: 'succeeded' }]);
    await h.call('endpoints.delete', { params: { id: e.id } });
  });
});
