#!/usr/bin/env node
// Builds the console into dist/ when it is missing or older than its sources.
// Run by the root `postinstall` and before `pnpm dev`, so neither needs a step
// the README does not show. It never fails the caller: without a build the
// API still works and the gateway answers `/` with 503 console_not_built.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = path.join(here, 'dist', 'index.html');

function newest(p) {
  const st = statSync(p);
  if (!st.isDirectory()) return st.mtimeMs;
  return Math.max(st.mtimeMs, ...readdirSync(p).map((f) => newest(path.join(p, f))));
}

const sources = [path.join(here, 'web'), path.join(here, 'vite.config.mjs'), path.join(here, 'package.json')];
const stale = !existsSync(dist) || statSync(dist).mtimeMs < Math.max(...sources.map(newest));
if (!stale && !process.argv.includes('--force')) process.exit(0);

const vite = path.join(here, 'node_modules', 'vite', 'bin', 'vite.js');
if (!existsSync(vite)) {
  process.stderr.write('console: vite is not installed yet (run pnpm install); the console is not built.\n');
  process.exit(0);
}
process.stderr.write('console: building the web console (apps/console/dist)...\n');
const res = spawnSync(process.execPath, [vite, 'build', '--logLevel', 'warn'], { cwd: here, stdio: 'inherit' });
if (res.status !== 0) process.stderr.write('console: the build failed; the gateway will answer / with 503 until it succeeds.\n');
process.exit(res.status !== 0 && process.argv.includes('--strict') ? 1 : 0);
