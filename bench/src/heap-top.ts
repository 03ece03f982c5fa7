/**
 * `npx tsx bench/src/heap-top.ts <file.heapsnapshot> [n]`: what a V8 heap
 * snapshot holds, as the n largest groups of objects by self size (grouped by
 * constructor or type) and by retained string/array space. A first look at a
 * service's RSS before reaching for DevTools.
 */
import { readFileSync } from 'node:fs';

const [file, nArg] = process.argv.slice(2);
if (!file) throw new Error('usage: heap-top.ts <file.heapsnapshot> [n]');
const n = Number(nArg ?? 30);

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}
const snap = JSON.parse(readFileSync(file, 'utf8')) as Snapshot;
const fields = snap.snapshot.meta.node_fields;
const types = snap.snapshot.meta.node_types[0];
const width = fields.length;
const [typeAt, nameAt, sizeAt] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f)) as [number, number, number];

const groups = new Map<string, { count: number; bytes: number }>();
let total = 0;
for (let i = 0; i < snap.nodes.length; i += width) {
  const type = types[snap.nodes[i + typeAt]!]!;
  const bytes = snap.nodes[i + sizeAt]!;
  total += bytes;
  // Objects by constructor; strings, code, arrays and the rest by their type.
  const key = type === 'object' || type === 'closure' ? `${type} ${snap.strings[snap.nodes[i + nameAt]!]}` : type;
  const g = groups.get(key) ?? { count: 0, bytes: 0 };
  g.count++;
  g.bytes += bytes;
  groups.set(key, g);
}
const mib = (b: number) => (b / 1048576).toFixed(1);
process.stdout.write(`${file}: ${mib(total)} MiB in ${snap.nodes.length / width} objects\n\n| group | objects | self MiB | share |\n|---|---|---|---|\n`);
for (const [k, g] of [...groups].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, n)) {
  process.stdout.write(`| ${k.slice(0, 60)} | ${g.count} | ${mib(g.bytes)} | ${((100 * g.bytes) / total).toFixed(1)}% |\n`);
}
