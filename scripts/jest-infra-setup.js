// jest globalSetup of the int and e2e projects: find the real Postgres and
// NATS (JetStream) the integration tests run on, and publish them to the
// workers as TEST_DATABASE_URL / TEST_NATS_URL (env set here is inherited by
// the workers). Order of preference:
//   1. TEST_DATABASE_URL | DATABASE_URL | postgres://postgres@127.0.0.1:5432/test
//      TEST_NATS_URL | NATS_URL | nats://127.0.0.1:4222, if they answer;
//   2. else containers via testcontainers (postgres:15, nats:2.9 -js) when
//      `docker info` works;
//   3. else on CI: fail the run (integration tests never skip silently there);
//      elsewhere: a loud warning, the variable stays unset and the tests that
//      need it skip (see testInfra() in @dws/testing).
import { execFile } from 'node:child_process';
import net from 'node:net';
import postgres from 'postgres';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';

const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test';
const DEFAULT_NATS_URL = 'nats://127.0.0.1:4222';
// Test databases are named t_<prefix>_<base36 ms>_<8 hex> (uniqueName in
// @dws/testing); ones older than this were left by a crashed run.
const STALE_TEST_DB_MS = 6 * 60 * 60 * 1000;
// Streams of a test bus namespace older than this were left by an earlier run.
const STALE_TEST_STREAM_MS = 60 * 60 * 1000;

export default async function setup() {
  const ci = isCi(process.env.CI);
  let databaseUrl = process.env.TEST_DATABASE_URL || process.env.DATABASE_URL || DEFAULT_DATABASE_URL;
  let natsUrl = process.env.TEST_NATS_URL || process.env.NATS_URL || DEFAULT_NATS_URL;

  const [pgProblem, natsProblem] = await Promise.all([probePostgres(databaseUrl), probeNats(natsUrl)]);
  const missing = [];
  if (pgProblem) missing.push({ what: 'postgres', url: databaseUrl, problem: pgProblem });
  if (natsProblem) missing.push({ what: 'nats', url: natsUrl, problem: natsProblem });

  let teardown = async () => {};
  if (missing.length > 0 && (await dockerWorks())) {
    try {
      const started = await startContainers(missing.map((m) => m.what));
      if (started.databaseUrl) databaseUrl = started.databaseUrl;
      if (started.natsUrl) natsUrl = started.natsUrl;
      teardown = started.stop;
      missing.length = 0;
    } catch (err) {
      for (const m of missing) m.problem += `; testcontainers failed: ${errorText(err)}`;
    }
  }

  if (missing.length > 0) {
    const lines = missing.map((m) => `${m.what} at ${m.url}: ${m.problem}`);
    if (ci) {
      throw new Error(
        `Integration infra missing on CI (tests must not skip there):\n  ${lines.join('\n  ')}\n` +
          'Set DATABASE_URL / NATS_URL (NATS with JetStream) or make Docker available.',
      );
    }
    loudWarning(lines);
  }

  const has = (what) => !missing.some((m) => m.what === what);
  if (has('postgres')) {
    process.env.TEST_DATABASE_URL = databaseUrl;
    await sweepStaleTestDatabases(databaseUrl).catch(() => {});
  }
  if (has('nats')) {
    process.env.TEST_NATS_URL = natsUrl;
    await sweepStaleTestStreams(natsUrl).catch(() => {});
  }

  // jest ignores a value returned from globalSetup; a globalTeardown may call
  // this. Without one, testcontainers' reaper removes the containers when the
  // jest process exits.
  globalThis.__DWS_INFRA_TEARDOWN__ = teardown;
  return teardown;
}

function isCi(value) {
  return value !== undefined && value !== '' && value !== '0' && value.toLowerCase() !== 'false';
}

/** null when `select 1` works, else why not. */
async function probePostgres(url) {
  const sql = postgres(url, { max: 1, connect_timeout: 3, idle_timeout: 1, onnotice: () => {} });
  try {
    await sql`select 1`;
    return null;
  } catch (err) {
    return errorText(err);
  } finally {
    await sql.end({ timeout: 1 }).catch(() => {});
  }
}

/** null when the server sends an INFO line with JetStream on, else why not. */
function probeNats(url) {
  let host;
  let port;
  try {
    const u = new URL(url.split(',')[0].trim());
    host = u.hostname || '127.0.0.1';
    port = Number(u.port || 4222);
  } catch {
    return Promise.resolve(`not a URL: ${url}`);
  }
  return new Promise((resolve) => {
    let buf = '';
    const socket = net.connect({ host, port });
    const done = (problem) => {
      socket.destroy();
      resolve(problem);
    };
    socket.setTimeout(3000, () => done('no INFO line within 3s'));
    socket.on('error', (err) => done(errorText(err)));
    socket.on('data', (chunk) => {
      buf += chunk.toString('utf8');
      const nl = buf.indexOf('\n');
      if (nl < 0) return;
      const line = buf.slice(0, nl).trim();
      if (!line.startsWith('INFO ')) return done(`not a NATS server (got ${JSON.stringify(line.slice(0, 40))})`);
      try {
        const info = JSON.parse(line.slice(5));
        done(info.jetstream ? null : 'JetStream is not enabled (start nats-server with -js)');
      } catch {
        done('unreadable INFO line');
      }
    });
  });
}

function dockerWorks() {
  return new Promise((resolve) => {
    execFile('docker', ['info'], { timeout: 10_000 }, (err) => resolve(!err));
  });
}

/** Starts the missing ones; `stop` stops what was started. */
async function startContainers(whats) {
  const { GenericContainer, Wait } = await import('testcontainers');
  const started = [];
  const result = { databaseUrl: undefined, natsUrl: undefined, stop: async () => {} };
  try {
    if (whats.includes('postgres')) {
      const c = await new GenericContainer('postgres:15')
        .withEnvironment({ POSTGRES_HOST_AUTH_METHOD: 'trust', POSTGRES_DB: 'test' })
        .withExposedPorts(5432)
        .withWaitStrategy(Wait.forLogMessage(/database system is ready to accept connections/, 2))
        .withStartupTimeout(120_000)
        .start();
      started.push(c);
      result.databaseUrl = `postgres://postgres@${c.getHost()}:${c.getMappedPort(5432)}/test`;
    }
    if (whats.includes('nats')) {
      const c = await new GenericContainer('nats:2.9')
        .withCommand(['-js'])
        .withExposedPorts(4222)
        .withWaitStrategy(Wait.forLogMessage(/Server is ready/))
        .withStartupTimeout(60_000)
        .start();
      started.push(c);
      result.natsUrl = `nats://${c.getHost()}:${c.getMappedPort(4222)}`;
    }
  } catch (err) {
    await Promise.all(started.map((c) => c.stop().catch(() => {})));
    throw err;
  }
  result.stop = async () => {
    await Promise.all(started.map((c) => c.stop().catch(() => {})));
  };
  process.stderr.write(`jest-infra-setup: started containers for ${whats.join(', ')}\n`);
  return result;
}

/** Drops t_* databases a crashed run left behind (only ones older than STALE_TEST_DB_MS). */
async function sweepStaleTestDatabases(url) {
  const sql = postgres(url, { max: 1, connect_timeout: 3, onnotice: () => {} });
  try {
    const rows = await sql`select datname from pg_database where datname like 't\\_%'`;
    const now = Date.now();
    for (const { datname } of rows) {
      const m = /_([0-9a-z]{6,10})_[0-9a-f]{8}$/.exec(datname);
      if (!m) continue;
      const born = parseInt(m[1], 36);
      if (!Number.isFinite(born) || now - born < STALE_TEST_DB_MS) continue;
      await sql.unsafe(`drop database if exists "${datname.replace(/"/g, '""')}" with (force)`).catch(() => {});
    }
  } finally {
    await sql.end({ timeout: 1 }).catch(() => {});
  }
}

// Streams of a test bus namespace: uniqueName (`<PREFIX>_<base36 ms>_<8 hex>_`)
// or the e2e deployments' `E2E<6 hex>_`, upper-cased by the prefixed bus.
const TEST_STREAM = /^(?:[A-Z0-9]+_[0-9A-Z]{6,10}_[0-9A-F]{8}|E2E[0-9A-F]{6})_/;

/**
 * Every test file works in its own bus namespace; a crashed or killed run
 * leaves its streams behind, and hundreds of idle streams and consumers slow
 * the server for everyone. Delete test namespaces' streams older than the
 * stale age (a concurrent run's are younger).
 */
async function sweepStaleTestStreams(url) {
  const nc = await connect({ servers: url, timeout: 3000 });
  try {
    const jsm = await jetstreamManager(nc);
    const now = Date.now();
    const stale = [];
    // Listed first, deleted after: deleting while paging the list would skip streams.
    for await (const si of jsm.streams.list()) {
      if (TEST_STREAM.test(si.config.name) && now - Date.parse(si.created) >= STALE_TEST_STREAM_MS) stale.push(si.config.name);
    }
    for (const name of stale) await jsm.streams.delete(name).catch(() => {});
  } finally {
    await nc.close().catch(() => {});
  }
}

function loudWarning(lines) {
  const bar = '!'.repeat(78);
  process.stderr.write(
    [
      '',
      bar,
      '!!  INTEGRATION INFRA MISSING: tests that need real Postgres/NATS WILL BE SKIPPED',
      ...lines.map((l) => `!!    ${l}`),
      '!!  Start Postgres and NATS (-js), set DATABASE_URL / NATS_URL, or start Docker.',
      '!!  (On CI, with CI set, this is an error instead.)',
      bar,
      '',
      '',
    ].join('\n'),
  );
}

function errorText(err) {
  return err instanceof Error ? err.message || err.code || err.name : String(err);
}
