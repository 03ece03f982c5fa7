#!/usr/bin/env node
// `node scripts/gen.mjs`: regenerate src/gen from proto/ (buf + the local
// protoc-gen-es; offline). `--check`: generate into a temp dir and exit 1 when
// the committed src/gen differs from it.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const buf = path.join(root, 'node_modules', '.bin', 'buf');
const committed = path.join(root, 'libs', 'proto', 'src', 'gen');
const check = process.argv.includes('--check');

function generate(outBase) {
  const args = ['generate', '--template', 'proto/buf.gen.yaml', ...(outBase ? ['-o', outBase] : [])];
  const res = spawnSync(buf, args, { cwd: root, stdio: 'inherit' });
  if (res.status !== 0) {
    console.error(`buf ${args.join(' ')} failed${res.error ? `: ${res.error.message}` : ''}`);
    process.exit(res.status || 1);
  }
}

function files(dir, base = dir) {
  let out = [];
  let entries = [];
  try {
    entries = readdirSync(dir);
  } catch {
    return out;
  }
  for (const name of entries) {
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) out = out.concat(files(p, base));
    else out.push(path.relative(base, p));
  }
  return out.sort();
}

if (!check) {
  generate();
  process.exit(0);
}

const tmp = mkdtempSync(path.join(tmpdir(), 'dws-proto-'));
try {
  generate(tmp);
  const fresh = path.join(tmp, 'libs', 'proto', 'src', 'gen');
  const a = files(committed);
  const b = files(fresh);
  const stale = [...new Set([...a, ...b])].filter(
    (f) => !a.includes(f) || !b.includes(f) || !readFileSync(path.join(committed, f)).equals(readFileSync(path.join(fresh, f))),
  );
  if (stale.length > 0) {
    console.error(`libs/proto/src/gen is stale (run \`pnpm proto\`): ${stale.join(', ')}`);
    process.exit(1);
  }
  console.log('libs/proto/src/gen is up to date');
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
