// Tests whose verdict hangs on a few MiB of the heap (what a collection kept, whether one runs) run their
// scenario in a fresh process: jest's is shared by many test files (in ESM mode it keeps their modules:
// ~1.1 GB by mid-run on CI before jest.config's worker limit), whose leftovers, and a young generation
// sized by them (how much a scenario's own garbage gets promoted), move the readings by more than the few
// MiB a scenario holds. A scenario script prints one JSON line of what it saw; its test judges it.
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const here = path.dirname(fileURLToPath(import.meta.url));

/** Runs a scenario script of this folder in a fresh process (through tsx) and returns the JSON line it printed. */
export async function runScenario<T>(script: string, ...args: string[]): Promise<T> {
  const tsx = createRequire(import.meta.url).resolve('tsx');
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', tsx, path.join(here, script), ...args], { timeout: 50_000 });
  return JSON.parse(stdout) as T;
}

/**
 * In a scenario: polls `check` every 10 ms until it holds or `ms` pass (a full collection's reading
 * arrives in a performance entry a moment after it).
 */
export async function until(check: () => boolean | Promise<boolean>, ms: number): Promise<void> {
  for (const deadline = Date.now() + ms; !(await check()) && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 10));
}
