import { execFileSync } from 'node:child_process';
import { chownSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, startNatsServer, untilListening } from '@dws/testing';

/**
 * A Postgres cluster and a nats-server of the chaos run's own, on free ports
 * under a temporary directory, so restarting them (crash-like: SIGKILL, and
 * `pg_ctl stop -m immediate`) hurts no other test on the machine. Uses the
 * machine's binaries: Debian's postgresql (initdb and pg_ctl under
 * /usr/lib/postgresql/<v>/bin) and nats-server.
 */
export interface PrivateInfra {
  databaseUrl: string;
  natsUrl: string;
  restartNats(): Promise<void>;
  restartPostgres(): Promise<void>;
  stop(): Promise<void>;
}

function pgBin(tool: string): string {
  const root = '/usr/lib/postgresql';
  const versions = readdirSync(root).sort((a, b) => Number(b) - Number(a));
  if (!versions[0]) throw new Error(`no Postgres under ${root}`);
  return path.join(root, versions[0], 'bin', tool);
}

/** Postgres refuses to run as root: as root, its tools run as the postgres user. */
function asPostgres(bin: string, args: string[]): void {
  const root = process.getuid?.() === 0;
  execFileSync(root ? 'runuser' : bin, root ? ['-u', 'postgres', '--', bin, ...args] : args, { stdio: 'pipe' });
}

export async function startPrivateInfra(): Promise<PrivateInfra> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'dws-chaos-infra-'));
  const pgData = path.join(dir, 'pg');
  const natsDir = path.join(dir, 'nats');
  if (process.getuid?.() === 0) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    chownSync(dir, uid, gid);
  }
  const [pgPort, natsPort] = [await freePort(), await freePort()];

  // fsync off: this cluster lives for one run; a crash of Postgres (not of the machine) loses nothing committed.
  asPostgres(pgBin('initdb'), ['-D', pgData, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync']);
  const pgOpts = `-p ${pgPort} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`;
  const startPg = async () => {
    asPostgres(pgBin('pg_ctl'), ['-D', pgData, '-o', pgOpts, '-l', path.join(dir, 'pg.log'), '-w', 'start']);
    await untilListening(pgPort, 'postgres');
  };
  await startPg();

  let nats = await startNatsServer({ port: natsPort, storeDir: natsDir });

  return {
    databaseUrl: `postgres://postgres@127.0.0.1:${pgPort}/postgres`,
    natsUrl: `nats://127.0.0.1:${natsPort}`,
    async restartNats() {
      await nats.kill();
      nats = await startNatsServer({ port: natsPort, storeDir: natsDir });
    },
    async restartPostgres() {
      // immediate: no checkpoint, clients cut off mid-statement: what a crash looks like to the services.
      asPostgres(pgBin('pg_ctl'), ['-D', pgData, '-m', 'immediate', 'stop']);
      await startPg();
    },
    async stop() {
      await nats.kill();
      try {
        asPostgres(pgBin('pg_ctl'), ['-D', pgData, '-m', 'immediate', 'stop']);
      } catch {
        /* already down */
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
