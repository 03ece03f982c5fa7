import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hashStepId, keyFingerprint } from '@dws/protocol';
import { createRunner, NonRetriableError, type Runner } from '@dws/sdk';
import { modes, startHarness, until, type Harness, type Workspace } from './harness.js';

const twoSteps = (r: Runner) =>
  r.workflow<{ n: number }>('double', { triggers: [{ event: 'math/double' }, { cron: '0 * * * *' }], retry: { maxAttempts: 3 }, steps: [{ name: 'a' }] }, async ({ event, step }) => {
    const a = await step.run('a', () => event.data.n * 2);
    const b = await step.sleep('nap', '1s');
    return { a, b };
  });

describe.each(modes())('invoker on %s: register, list, route, sign', (mode) => {
  let h: Harness;
  let ws: Workspace;
  beforeAll(async () => {
    h = await startHarness(mode);
    ws = await h.workspace();
  }, 60_000);
  afterAll(async () => {
    await h?.close();
  }, 30_000);

  it('validates registrations: 400 naming the field, lenient on an absent protocol version, strict on another', async () => {
    const ok = { app: 'a', url: 'http://127.0.0.1:9/invoke', workflows: [{ name: 'w' }] };
    const cases: [string, unknown, RegExp][] = [
      ['not an object', [], /JSON object/],
      ['no app', { ...ok, app: undefined }, /app is required/],
      ['blank app', { ...ok, app: '  ' }, /app is required/],
      ['app over 256', { ...ok, app: 'a'.repeat(257) }, /over 256/],
      ['no url', { ...ok, url: undefined }, /url is required/],
      ['relative url', { ...ok, url: '/invoke' }, /absolute http/],
      ['ftp url', { ...ok, url: 'ftp://x/invoke' }, /absolute http/],
      ['workflows missing', { ...ok, workflows: undefined }, /workflows must be an array/],
      ['workflow twice', { ...ok, workflows: [{ name: 'w' }, { name: 'w' }] }, /registered twice/],
      ['trigger without event or cron', { ...ok, workflows: [{ name: 'w', triggers: [{}] }] }, /event name or a cron/],
      ['trigger if not a string', { ...ok, workflows: [{ name: 'w', triggers: [{ event: 'e', if: 1 }] }] }, /CEL string/],
      ['bad maxAttempts', { ...ok, workflows: [{ name: 'w', retry: { maxAttempts: 0 } }] }, /maxAttempts/],
      ['runtime not a string', { ...ok, runtime: 5 }, /runtime must be a string/],
      ['protocol version 2', { ...ok, protocolVersion: 2 }, /protocol version/i],
    ];
    for (const [what, body, message] of cases) {
      await expect(h.call(ws, 'register', { body })).rejects.toMatchObject({ status: 400, message: expect.stringMatching(message) }).catch((err: unknown) => {
        throw new Error(`${what}: ${String(err)}`);
      });
    }
    await expect(h.call(ws, 'register', { body: { ...ok, protocolVersion: 2 } })).rejects.toMatchObject({ code: 'protocol_version_mismatch' });
    expect((await h.call(ws, 'register', { body: ok })).status).toBe(200);
    expect((await h.call(ws, 'register', { body: { ...ok, protocolVersion: 1 } })).body).toEqual({ ok: true, runner: ok.url, app: 'a', workflows: ['w'] });
  });

  it('lists runners with liveness, key match and metadata, and workflows with retry, schedules and steps', async () => {
    const other = await h.workspace();
    const good = await h.serveRunner(other, twoSteps, { runnerId: 'r-good', app: 'math' });
    const bad = await h.serveRunner(other, twoSteps, { runnerId: 'r-bad', app: 'math', signingKey: 'not-the-workspace-key' });
    const { body: runners } = await h.call(other, 'runners.list', { query: { app: 'math' } });
    expect(runners).toEqual([
      expect.objectContaining({ id: 'r-bad', app: 'math', url: bad.url, transport: 'serve', live: true, keyMatch: false }),
      expect.objectContaining({
        id: 'r-good',
        app: 'math',
        url: good.url,
        transport: 'serve',
        runtime: `node ${process.versions.node}`,
        language: 'typescript',
        version: '0.1.0',
        workflows: ['double'],
        live: true,
        keyMatch: true,
      }),
    ]);
    expect(Date.now() - Date.parse(runners[1].lastSeen)).toBeLessThan(10_000);
    // Another workspace sees none of it.
    expect((await h.call(ws, 'runners.list', { query: { app: 'math' } })).body).toEqual([]);

    const { body: workflows } = await h.call(other, 'workflows.list', {});
    expect(workflows).toEqual([
      expect.objectContaining({
        name: 'double',
        app: 'math',
        retry: { maxAttempts: 3 },
        scheduled: true,
        schedules: ['0 * * * *'],
        steps: [{ name: 'a' }],
        triggers: [{ event: 'math/double' }, { cron: '0 * * * *' }],
      }),
    ]);

    // Liveness: 90 s since the last heartbeat (SPEC Limits). Age the row instead of waiting.
    await h.db.query(`update invoker.runners set last_seen = now() - interval '91 seconds' where workspace_id = $1 and id = 'r-good'`, [other.id]);
    const aged = (await h.call(other, 'runners.list', { query: { app: 'math' } })).body;
    expect(aged.find((r: { id: string }) => r.id === 'r-good').live).toBe(false);
    // ... and out of routing: a pinned run waits for it.
    await until('the directory cache to expire', async () => {
      const out = await h.invoke(other, { app: 'math', workflow: 'double', runner: 'r-good' });
      return out.outcome === 'no_runner' ? out : undefined;
    });
    // A heartbeat (re-registration) brings it back.
    await h.call(other, 'register', { body: good.runner.registerBody() });
    const back = await h.invoke(other, { app: 'math', workflow: 'double', runner: 'r-good', data: { n: 2 } });
    expect(back).toMatchObject({ outcome: 'reply', status: 206, runnerId: 'r-good' });
  });

  it('signs every invoke with the workspace key: a runner holding another key answers 401', async () => {
    const other = await h.workspace();
    await h.serveRunner(other, twoSteps, { runnerId: 'wrong-key', app: 'keys', signingKey: 'nope' });
    const out = await h.invoke(other, { app: 'keys', workflow: 'double', data: { n: 1 } });
    expect(out).toMatchObject({ outcome: 'reply', status: 401, body: { error: { code: 'invalid_signature' } } });
    expect(keyFingerprint('nope')).not.toBe(keyFingerprint(other.signingKey));
  });

  it('routes pinned runs only to their runner and anycasts the rest across live runners', async () => {
    const other = await h.workspace();
    const r1 = await h.serveRunner(other, twoSteps, { runnerId: 'r1', app: 'pool' });
    const r2 = await h.serveRunner(other, twoSteps, { runnerId: 'r2', app: 'pool' });
    for (let i = 0; i < 8; i++) {
      const out = await h.invoke(other, { app: 'pool', workflow: 'double', runner: 'r2', data: { n: i } });
      expect(out).toMatchObject({ outcome: 'reply', status: 206, runnerId: 'r2', body: { opcodes: [{ op: 'StepRun', name: 'a', data: i * 2 }] } });
    }
    expect(r1.seen).toHaveLength(0);
    expect(await h.invoke(other, { app: 'pool', workflow: 'double', runner: 'r-missing' })).toMatchObject({ outcome: 'no_runner' });
    expect(await h.invoke(other, { app: 'pool', workflow: 'unknown' })).toMatchObject({ outcome: 'no_runner' });
    expect(await h.invoke(other, { app: 'other-app', workflow: 'double' })).toMatchObject({ outcome: 'no_runner' });

    const picked = new Set<string>();
    for (let i = 0; i < 30 && picked.size < 2; i++) picked.add((await h.invoke(other, { app: 'pool', workflow: 'double' })).runnerId);
    expect([...picked].sort()).toEqual(['r1', 'r2']);
    expect(r1.seen.length).toBeGreaterThan(0);
    expect(r2.seen.length).toBeGreaterThan(8);
  });

  it('passes over a runner that stopped answering: anycast finishes on the other one at once', async () => {
    const other = await h.workspace();
    const dead = await h.serveRunner(other, twoSteps, { runnerId: 'dead', app: 'failover' });
    await h.serveRunner(other, twoSteps, { runnerId: 'alive', app: 'failover' });
    await dead.close();
    for (let i = 0; i < 6; i++) {
      expect(await h.invoke(other, { app: 'failover', workflow: 'double', data: { n: 1 } })).toMatchObject({ outcome: 'reply', status: 206, runnerId: 'alive' });
    }
    // Pinned to the dead one: a transport error, which the scheduler retries on its budget.
    expect(await h.invoke(other, { app: 'failover', workflow: 'double', runner: 'dead' })).toMatchObject({ outcome: 'transport_error', runnerId: 'dead' });
  });

  it('fails a reply over 1 MiB and one that states another protocol version, and passes 4xx/5xx through', async () => {
    const other = await h.workspace();
    let mode2: 'big' | 'v2' | '500' | 'exact' = 'big';
    const server: Server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        if (mode2 === 'big') return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ data: 'x'.repeat(1024 * 1024 + 10), logs: [] }));
        if (mode2 === 'v2') return void res.writeHead(200, { 'x-service-protocol': '2' }).end('[]');
        if (mode2 === '500') return void res.writeHead(500).end(JSON.stringify({ error: { message: 'boom' }, logs: [] }));
        // Just under the cap is fine.
        res.writeHead(200).end(JSON.stringify({ data: 'y'.repeat(1024 * 1024 - 100), logs: [] }));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/invoke`;
      await h.call(other, 'register', { body: { app: 'raw', url, workflows: [{ name: 'w' }] } });
      expect(await h.invoke(other, { app: 'raw', workflow: 'w' })).toMatchObject({ outcome: 'reply', status: 413, body: { error: { code: 'invoke_reply_too_large' } }, runnerId: url });
      mode2 = 'v2';
      expect(await h.invoke(other, { app: 'raw', workflow: 'w' })).toMatchObject({ outcome: 'reply', status: 400, body: { error: { code: 'protocol_version_mismatch' } } });
      mode2 = '500';
      expect(await h.invoke(other, { app: 'raw', workflow: 'w' })).toMatchObject({ outcome: 'reply', status: 500, body: { error: { message: 'boom' } } });
      mode2 = 'exact';
      const exact = await h.invoke(other, { app: 'raw', workflow: 'w' });
      expect(exact).toMatchObject({ outcome: 'reply', status: 200 });
      expect(exact.raw.length).toBeLessThanOrEqual(1024 * 1024);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  it('drives a real SDK runner to completion through the invoker (memo round trip)', async () => {
    const other = await h.workspace();
    await h.serveRunner(other, (r) =>
      r.workflow('fails', async ({ step }) => {
        await step.run('ok', () => 1);
        throw new NonRetriableError('nope');
      }),
    { runnerId: 'sdk', app: 'sdk' });
    const first = await h.invoke(other, { app: 'sdk', workflow: 'fails' });
    expect(first).toMatchObject({ status: 206, body: { opcodes: [{ name: 'ok', data: 1 }] } });
    const second = await h.invoke(other, { app: 'sdk', workflow: 'fails', steps: { [hashStepId('ok')]: { data: 1 } } });
    expect(second).toMatchObject({ status: 400, body: { error: { message: 'nope' } } });
  });

  it('gives every invoke a W3C trace context: one trace per run, one span per invoke, over HTTP and Connect', async () => {
    const other = await h.workspace();
    const traced = (r: Runner) => r.workflow('traced', ({ ctx }) => ctx.traceparent ?? null);
    await h.serveRunner(other, traced, { runnerId: 'tr', app: 'trace' });
    const a = await h.invoke(other, { app: 'trace', workflow: 'traced', runId: 'run_same' });
    const b = await h.invoke(other, { app: 'trace', workflow: 'traced', runId: 'run_same' });
    const re = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/;
    const [, traceA, spanA] = re.exec(a.body.data)!;
    const [, traceB, spanB] = re.exec(b.body.data)!;
    expect(traceA).toBe(traceB);
    expect(spanA).not.toBe(spanB);

    const gw = await h.gateway(other);
    const runner = createRunner({ apiKey: 'k', env: {}, url: gw.url, app: 'trace-c', runnerId: 'trc' });
    traced(runner);
    const conn = runner.connect();
    try {
      await conn.ready;
      const c = await h.invoke(other, { app: 'trace-c', workflow: 'traced', runId: 'run_same' });
      expect(re.exec(c.body.data)?.[1]).toBe(traceA);
    } finally {
      await conn.close();
    }
  });
});
