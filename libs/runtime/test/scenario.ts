import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const here = path.dirname(fileURLToPath(import.meta.url));

/**
 * Runs a scenario script of this folder in a fresh process (through tsx) and returns the JSON line it
 * printed: for tests whose verdict hangs on a few MiB of the heap (why: quiet-gc-process.ts's header).
 */
export async function runScenario<T>(script: string, ...args: string[]): Promise<T> {
  const tsx = createRequire(import.meta.url).resolve('tsx');
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', tsx, path.join(here, script), ...args], { timeout: 50_000 });
  return JSON.parse(stdout) as T;
}
