#!/usr/bin/env node
// `pnpm build`: each service's bin.ts and the embedded entry (apps/fleet/src/dev.ts)
// bundled by esbuild into dist/<name>.js (ESM, node20, linked source maps, not
// minified), so services run on plain `node` without tsx's loader in memory.
//
//   node scripts/build.mjs              build everything
//   node scripts/build.mjs --if-stale   build only when dist/ is missing or older than an input
//   node scripts/build.mjs --quiet      print nothing unless it fails
//
// Files found through import.meta.url (each service's store/migrations, libs/db's
// pglite-init.mjs, PGlite's wasm and data, @dws/console-app resolved from
// libs/console) are not copied: in every bundled module, import.meta.url is
// rewritten to that module's own source file, relative to the bundle, so it
// means what it meant under tsx. dist/ therefore runs beside the tree it was
// built from (the repository with its node_modules; the Dockerfile keeps both).
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import { latin1Comments } from './latin1.mjs';

export const ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
export const DIST = path.join(ROOT, 'dist');

/**
 * Entry point -> bundle, both relative to the repository. The bundles mirror the sources'
 * paths (`ps` and bench/src/bench.ts still tell services apart by `services/<name>/`),
 * and every output file, chunks included, sits two directories below dist/.
 */
export const ENTRIES = {
  'services/gateway/src/bin.ts': 'dist/services/gateway/bin.js',
  'services/ingest/src/bin.ts': 'dist/services/ingest/bin.js',
  'services/scheduler/src/bin.ts': 'dist/services/scheduler/bin.js',
  'services/invoker/src/bin.ts': 'dist/services/invoker/bin.js',
  'services/approvals/src/bin.ts': 'dist/services/approvals/bin.js',
  'services/webhook-dispatcher/src/bin.ts': 'dist/services/webhook-dispatcher/bin.js',
  'apps/fleet/src/dev.ts': 'dist/apps/fleet/dev.js',
};
const DEPTH = '../../';

// Every input of the last build with its mtime: --if-stale compares them.
const STAMP = path.join(DIST, '.build-inputs.json');
// Changes that reach the bundles without touching a bundled file.
const EXTRA_INPUTS = ['scripts/build.mjs', 'pnpm-lock.yaml', 'package.json'];

const LOADERS = { '.ts': 'ts', '.mts': 'ts', '.cts': 'ts', '.js': 'js', '.mjs': 'js', '.cjs': 'js' };

/**
 * import.meta.url in a bundle is the bundle's URL, so `new URL('./store/migrations',
 * import.meta.url)` in six services' main.ts would all name dist/store/migrations.
 * Rewrite it, in every module that uses it (ours and node_modules'), to the URL of
 * the module's own file, found relative to the bundle at run time.
 */
const sourceMetaUrl = {
  name: 'source-import-meta-url',
  setup(b) {
    b.onLoad({ filter: /\.[cm]?[jt]s$/ }, async (args) => {
      const text = await readFile(args.path, 'utf8');
      if (!text.includes('import.meta.url')) return undefined;
      const rel = DEPTH + path.relative(DIST, args.path).split(path.sep).join('/');
      const url = `new URL(${JSON.stringify(rel)}, import.meta.url).href`;
      return {
        contents: text.replaceAll('import.meta.url', url),
        loader: LOADERS[path.extname(args.path)] ?? 'js',
        resolveDir: path.dirname(args.path),
      };
    });
  },
};

/** True when dist/ has every bundle and no input changed since it was built. */
export function isFresh() {
  if (!Object.values(ENTRIES).every((out) => existsSync(path.join(ROOT, out)))) return false;
  let stamp;
  try {
    stamp = JSON.parse(readFileSync(STAMP, 'utf8'));
  } catch {
    return false;
  }
  if (JSON.stringify(stamp.entries) !== JSON.stringify(ENTRIES)) return false;
  for (const [file, mtime] of Object.entries(stamp.inputs)) {
    try {
      if (statSync(path.join(ROOT, file)).mtimeMs !== mtime) return false;
    } catch {
      return false;
    }
  }
  return true;
}

/** Write only what changed, each file by rename, so a process starting meanwhile never reads half a bundle. */
function writeAtomically(file, contents) {
  try {
    if (Buffer.compare(readFileSync(file), Buffer.from(contents)) === 0) return;
  } catch {
    /* new file */
  }
  mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, contents);
  renameSync(tmp, file);
}

/**
 * Chunks of earlier builds: their names change with their contents. One is removed
 * only after an hour, so a process started from the previous build can still load
 * the chunks it imports lazily (the OpenTelemetry exporter, at start).
 */
function pruneChunks(current) {
  const dir = path.join(DIST, 'shared', 'chunks');
  for (const f of readdirSync(dir)) {
    if (current.has(path.join(dir, f))) continue;
    const file = path.join(dir, f);
    if (Date.now() - statSync(file).mtimeMs > 3_600_000) rmSync(file, { force: true });
  }
}

/** Bundles every entry into dist/. Resolves to whether it built (false: --if-stale and fresh). */
export async function build({ ifStale = false, quiet = false } = {}) {
  if (ifStale && isFresh()) return false;
  const t0 = Date.now();
  const result = await esbuild
    .build({
      absWorkingDir: ROOT,
      entryPoints: Object.entries(ENTRIES).map(([entry, out]) => ({
        in: path.join(ROOT, entry),
        out: path.relative(DIST, out.replace(/\.js$/, '')),
      })),
      outdir: DIST,
      bundle: true,
      // Code the bundles share is written once, as chunks in dist/shared/chunks: a third of
      // the build time of seven whole bundles.
      splitting: true,
      chunkNames: 'shared/chunks/chunk-[hash]',
      platform: 'node',
      format: 'esm',
      target: 'node20',
      // Linked maps: --enable-source-maps and bench/src/profile-top.ts map bundle lines back
      // to source files. Not minified, so stack traces and profiles keep function names.
      sourcemap: 'linked',
      sourcesContent: false,
      // Bundled CommonJS calls require() for node's built-ins; an ES module has none.
      banner: {
        js: "import { createRequire as __dwsCreateRequire } from 'node:module'; const require = __dwsCreateRequire(import.meta.url);",
      },
      plugins: [sourceMetaUrl],
      metafile: true,
      write: false,
      logLevel: 'silent',
    })
    .catch((err) => {
      for (const e of err.errors ?? [])
        process.stderr.write(`build: ${e.location ? `${e.location.file}:${e.location.line}: ` : ''}${e.text}\n`);
      throw new Error('build: esbuild failed');
    });
  for (const f of result.outputFiles) {
    if (!f.path.endsWith('.js')) {
      writeAtomically(f.path, f.contents);
      continue;
    }
    const { code, outside } = latin1Comments(f.text);
    if (outside > 0) {
      process.stderr.write(`build: ${path.relative(ROOT, f.path)}: ${outside} characters past Latin-1 outside comments: V8 keeps its source two bytes a character\n`);
    }
    writeAtomically(f.path, code);
  }
  pruneChunks(new Set(result.outputFiles.map((f) => f.path)));
  const inputs = {};
  for (const file of [...Object.keys(result.metafile.inputs), ...EXTRA_INPUTS]) {
    inputs[file] = statSync(path.join(ROOT, file)).mtimeMs;
  }
  writeAtomically(STAMP, JSON.stringify({ entries: ENTRIES, inputs }));
  if (!quiet) {
    const js = result.outputFiles.filter((f) => f.path.endsWith('.js'));
    const mib = js.reduce((n, f) => n + f.contents.length, 0) / 1048576;
    process.stderr.write(
      `build: ${Object.keys(ENTRIES).length} entries in dist/ (${js.length} files, ${mib.toFixed(1)} MiB) in ${Date.now() - t0} ms\n`,
    );
  }
  return true;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  build({ ifStale: args.includes('--if-stale'), quiet: args.includes('--quiet') }).catch((err) => {
    process.stderr.write(`${err.message}\n`);
    process.exit(1);
  });
}
