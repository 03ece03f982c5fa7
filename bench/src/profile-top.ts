/**
 * `npx tsx bench/src/profile-top.ts <dir> [n] [self|inclusive]`: the top functions
 * of each service's main-thread V8 CPU profile written under DWS_CPU_PROF=<dir>
 * (`<dir>/<service>/*.cpuprofile`; the largest file of a service is its main
 * thread), or of what it allocated under DWS_ALLOC_PROF=<dir>
 * (`<dir>/<service>/*.heapprofile`, scripts/alloc-prof.cjs: bytes allocated,
 * garbage included). Prints one markdown table per service: function, where,
 * ms (or MiB) and share. Frames in the services' bundles (dist/,
 * scripts/build.mjs) are mapped back to their source files and lines through
 * the bundles' source maps.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { SourceMap } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

interface Node {
  id: number;
  children?: number[];
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  hitCount?: number;
}
interface Profile {
  nodes: Node[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

const [dir, nArg, modeArg] = process.argv.slice(2);
if (!dir) throw new Error('usage: profile-top.ts <dir> [n] [self|inclusive]');
const N = Number(nArg ?? 10);
/** inclusive: time under each of the project's own functions (services/, libs/), callees included. */
const INCLUSIVE = modeArg === 'inclusive';

function where(url: string, line: number): string {
  if (!url) return '(native)';
  const m = url.match(/node_modules\/(?:\.pnpm\/[^/]+\/node_modules\/)?((?:@[^/]+\/)?[^/]+)/);
  if (m) return m[1]!;
  const rel = url.replace(/^file:\/\//, '').replace(/^.*?\/(services|libs|apps)\//, '$1/');
  return `${rel}:${line + 1}`;
}

const maps = new Map<string, SourceMap | null>();

/** A bundle frame's source file URL and line (0-based), or the frame itself when it has no source map. */
function original(url: string, line: number, column: number): { url: string; line: number } {
  if (!url.startsWith('file://') || !url.endsWith('.js') || !/\/dist\//.test(url)) return { url, line };
  let map = maps.get(url);
  if (map === undefined) {
    const file = `${fileURLToPath(url)}.map`;
    map = existsSync(file) ? new SourceMap(JSON.parse(readFileSync(file, 'utf8')) as ConstructorParameters<typeof SourceMap>[0]) : null;
    maps.set(url, map);
  }
  const e = map?.findEntry(line, column);
  if (!e || !('originalSource' in e)) return { url, line };
  // Map sources are relative to the map file (a bundle's sits beside it).
  return { url: new URL(e.originalSource, pathToFileURL(fileURLToPath(url))).href, line: e.originalLine };
}

interface AllocNode {
  callFrame: Node['callFrame'];
  selfSize: number;
  children?: AllocNode[];
}

/** Bytes allocated under each function (self, or inclusive of the project's own callers), from a sampling heap profile. */
function allocations(file: string): { by: Map<string, number>; total: number } {
  const head = (JSON.parse(readFileSync(file, 'utf8')) as { head: AllocNode }).head;
  const by = new Map<string, number>();
  let total = 0;
  const walk = (n: AllocNode, stack: string[]) => {
    const o = original(n.callFrame.url, n.callFrame.lineNumber, n.callFrame.columnNumber);
    const k = `${n.callFrame.functionName || '(anonymous)'}\t${where(o.url, o.line)}`;
    const own = /\/(services|libs)\//.test(o.url) && !o.url.includes('node_modules');
    const here = INCLUSIVE ? (own && !stack.includes(k) ? [...stack, k] : stack) : [k];
    total += n.selfSize;
    for (const key of INCLUSIVE ? here : [k]) by.set(key, (by.get(key) ?? 0) + n.selfSize);
    for (const c of n.children ?? []) walk(c, here);
  };
  walk(head, []);
  return { by, total };
}

for (const svc of readdirSync(dir).sort()) {
  const sdir = path.join(dir, svc);
  if (!statSync(sdir).isDirectory()) continue;
  const heaps = readdirSync(sdir).filter((f) => f.endsWith('.heapprofile'));
  if (heaps.length > 0) {
    const main = heaps.map((f) => path.join(sdir, f)).sort((a, b) => statSync(b).size - statSync(a).size)[0]!;
    const { by, total } = allocations(main);
    const mib = (b: number) => (b / 1048576).toFixed(1);
    process.stdout.write(`\n### ${svc} (allocated ${mib(total)} MiB)\n\n| function | where | ${INCLUSIVE ? 'inclusive' : 'self'} MiB | share |\n|---|---|---|---|\n`);
    for (const [k, b] of [...by.entries()].sort((a, b2) => b2[1] - a[1]).slice(0, N)) {
      const [fn, w] = k.split('\t');
      process.stdout.write(`| ${fn} | ${w} | ${mib(b)} | ${((100 * b) / total).toFixed(1)}% |\n`);
    }
    continue;
  }
  const files = readdirSync(sdir).filter((f) => f.endsWith('.cpuprofile'));
  if (files.length === 0) continue;
  const main = files.map((f) => path.join(sdir, f)).sort((a, b) => statSync(b).size - statSync(a).size)[0]!;
  const p = JSON.parse(readFileSync(main, 'utf8')) as Profile;
  for (const n of p.nodes) {
    const o = original(n.callFrame.url, n.callFrame.lineNumber, n.callFrame.columnNumber);
    n.callFrame.url = o.url;
    n.callFrame.lineNumber = o.line;
  }
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const keyOf = (n: Node) => `${n.callFrame.functionName || '(anonymous)'}\t${where(n.callFrame.url, n.callFrame.lineNumber)}`;
  const self = new Map<string, number>();
  let total = 0;
  for (let i = 0; i < p.samples.length; i++) {
    const n = byId.get(p.samples[i]!)!;
    const dt = (p.timeDeltas[i] ?? 0) / 1000;
    if (n.callFrame.functionName === '(idle)') continue;
    total += dt;
    if (!INCLUSIVE) {
      self.set(keyOf(n), (self.get(keyOf(n)) ?? 0) + dt);
      continue;
    }
    const seen = new Set<string>();
    for (let id: number | undefined = n.id; id !== undefined; id = parent.get(id)) {
      const a = byId.get(id)!;
      if (!/\/(services|libs)\//.test(a.callFrame.url) || a.callFrame.url.includes('node_modules')) continue;
      const k = keyOf(a);
      if (seen.has(k)) continue;
      seen.add(k);
      self.set(k, (self.get(k) ?? 0) + dt);
    }
  }
  const top = [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, N);
  process.stdout.write(`\n### ${svc} (busy ${Math.round(total)} ms)\n\n| function | where | ${INCLUSIVE ? 'inclusive' : 'self'} ms | share |\n|---|---|---|---|\n`);
  for (const [k, ms] of top) {
    const [fn, w] = k.split('\t');
    process.stdout.write(`| ${fn} | ${w} | ${Math.round(ms)} | ${((100 * ms) / total).toFixed(1)}% |\n`);
  }
}
