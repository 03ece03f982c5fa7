import { afterEach, describe, expect, it } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { api, eventually, runReached } from '../src/api.js';
import { startDeployment, type Deployment, type Mode } from '../src/deployment.js';
import { realInfra } from '../src/infra.js';
import { ROOT } from '../src/processes.js';

/**
 * SPEC's per-step durability, from the runner's side: a runner process
 * SIGKILLed while step 5 of 10 runs, another runner of the app started, and
 * the run ends succeeded with steps 1-4 never run again (their results were
 * stored before step 5 began), step 5 run twice (it was in flight), and
 * steps 6-10 once. With checkpoints (the SDK's default) steps 1-5 ran in ONE
 * pass, each stored before the next began; over both transports.
 */
const modes: Mode[] = realInfra() ? ['embedded', 'fleet'] : ['embedded'];
const tsx = createRequire(path.join(ROOT, 'package.json')).resolve('tsx');

type Transport = 'serve' | 'connect';

function runnerProcess(dep: Deployment, journal: string, transport: Transport): Promise<ChildProcess> {
  const args = [path.join(ROOT, 'test-e2e/src/runner-process.ts'), dep.base, dep.secretKey, dep.signingKey, journal, transport];
  const child = spawn(process.execPath, ['--import', tsx, ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (b: Buffer) => ((out += b.toString()), out.includes('ready\n') && resolve(child)));
    child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
    child.once('exit', (code, signal) => reject(new Error(`runner process exited (${code ?? signal}) before ready:\n${out}`)));
  });
}

const cases = modes.flatMap((m) => (['serve', 'connect'] as const).map((t) => [m, t] as [Mode, Transport]));

describe.each(cases)('kill -9 of the runner mid-step (%s, %s)', (mode, transport) => {
  let dep: Deployment | undefined;
  const children: ChildProcess[] = [];
  let dir = '';
  afterEach(async () => {
    for (const c of children) c.kill('SIGKILL');
    await dep?.stop();
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  it('re-runs only the step in flight: stored steps are never run again', async () => {
    dep = await startDeployment(mode);
    dir = mkdtempSync(path.join(os.tmpdir(), 'dws-runner-crash-'));
    const journal = path.join(dir, 'journal');
    writeFileSync(journal, '');
    const first = await runnerProcess(dep, journal, transport);
    children.push(first);
    const sent = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'ten', data: {} } });
    const runId: string = sent.body.runId;
    expect(runId).toEqual(expect.any(String));
    const lines = () => readFileSync(journal, 'utf8').split('\n').filter((l) => l.startsWith(`${runId} `));
    await eventually('step 5 in flight', async () => (lines().includes(`${runId} 5`) ? true : undefined), 30_000);
    first.kill('SIGKILL');
    await new Promise((r) => first.once('exit', r));
    // Steps 1-4 were checkpointed in the pass that is now stuck in step 5: one pass so far.
    expect(lines().filter((l) => l === `${runId} pass`)).toHaveLength(1);
    children.push(await runnerProcess(dep, journal, transport));

    const d = dep;
    const run = await eventually(
      'run succeeded',
      async () => runReached((await api(d.base, 'GET', `/v1/runs/${runId}`, { key: d.secretKey })).body as { status?: string; result?: unknown }),
      60_000,
    );
    expect(run.result).toEqual({ total: 55 });
    const count = (i: number) => lines().filter((l) => l === `${runId} ${i}`).length;
    expect(Array.from({ length: 10 }, (_, i) => count(i + 1))).toEqual([1, 1, 1, 1, 2, 1, 1, 1, 1, 1]);
    // The retried pass ran steps 5-10 in one go (a transport retry may add one).
    expect(lines().filter((l) => l === `${runId} pass`).length).toBeLessThanOrEqual(3);
  }, 120_000);
});
