#!/usr/bin/env node
// `pnpm test`: jest in ESM mode over every project, results also written as
// JSON so .ci/run can print its closing "N passed, N failed" line.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const jest = path.join(root, 'node_modules', 'jest', 'bin', 'jest.js');
const args = [
  '--experimental-vm-modules',
  '--no-warnings=ExperimentalWarning',
  jest,
  '--json',
  // A leaked handle must never hang CI; tests still close what they open.
  '--forceExit',
  `--outputFile=${path.join(root, '.jest-results.json')}`,
  ...process.argv.slice(2),
];
const res = spawnSync(process.execPath, args, { stdio: 'inherit', cwd: root });
process.exit(res.status ?? 1);
