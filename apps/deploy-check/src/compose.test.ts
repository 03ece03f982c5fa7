import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { checkComposeFleet, interpolate, InterpolationError, loadCompose, secretDefaults, validateComposeSchema } from './compose.js';
import { checkDockerfile, startFlags } from './dockerfile.js';
import { REPO } from './checks.js';

type Dict = Record<string, any>; // tests reach into rendered objects freely

const composeText = readFileSync(path.join(REPO, 'docker-compose.yml'), 'utf8');
const ENV = { SERVICE_SEAL_KEY: 'k', POSTGRES_PASSWORD: 'p' };

describe('compose interpolation', () => {
  it('follows the compose rules', () => {
    const env = { A: 'a', E: '' };
    expect(interpolate('$A ${A} ${B:-d} ${E:-d} ${E-d} ${B-d} ${A:+r} ${B+r} $$A', env, 'x')).toBe('a a d d  d r  $A');
    expect(() => interpolate('${E:?need E}', env, 'x')).toThrow(InterpolationError);
    expect(interpolate('${E?need E}', env, 'x')).toBe('');
    expect(() => interpolate('${B?need B}', env, 'x')).toThrow(/required variable B is missing a value: need B/);
  });
});

describe('docker-compose.yml', () => {
  it('is valid against the compose-spec schema and runs the six services on Postgres and NATS', () => {
    const doc = loadCompose(composeText, ENV);
    expect(validateComposeSchema(doc)).toEqual([]);
    expect(checkComposeFleet(doc)).toEqual([]);
    expect((doc.services as Dict).gateway.environment.SERVICE_SEAL_KEY).toBe('k');
  });

  it('refuses to start without SERVICE_SEAL_KEY or POSTGRES_PASSWORD', () => {
    expect(() => loadCompose(composeText, { POSTGRES_PASSWORD: 'p' })).toThrow(/SERVICE_SEAL_KEY/);
    expect(() => loadCompose(composeText, { SERVICE_SEAL_KEY: 'k' })).toThrow(/POSTGRES_PASSWORD/);
    expect(secretDefaults(composeText, ['SERVICE_SEAL_KEY', 'POSTGRES_PASSWORD'])).toEqual([]);
  });

  it('flags a secret with a default', () => {
    expect(secretDefaults('K: ${SERVICE_SEAL_KEY:-change-me}', ['SERVICE_SEAL_KEY'])).toEqual([
      'SERVICE_SEAL_KEY is used as ${SERVICE_SEAL_KEY:-change-me}: it must be ${SERVICE_SEAL_KEY:?...} so compose refuses to start without it',
    ]);
  });

  it('fails a file the schema refuses', () => {
    const doc = loadCompose(composeText, ENV) as Dict;
    doc.services.gateway.restart = 5;
    doc.services.ingest.helthcheck = { test: ['CMD', 'true'] };
    const problems = validateComposeSchema(doc);
    expect(problems).toContainEqual(expect.stringMatching(/^\/services\/gateway\/restart must be string/));
    expect(problems).toContainEqual(expect.stringMatching(/^\/services\/ingest must NOT have additional properties .*helthcheck/));
  });

  it('fails a service not built from the Dockerfile or without JetStream', () => {
    const doc = loadCompose(composeText, ENV) as Dict;
    doc.services.scheduler.command = ['pnpm', 'start:scheduler'];
    doc.services.nats.command = [];
    expect(checkComposeFleet(doc)).toEqual([
      'services.scheduler: command must be ["dist/services/scheduler/bin.js"] (the image\'s entrypoint is node)',
      'services.nats: JetStream is not enabled (-js)',
    ]);
  });
});

describe('Dockerfile', () => {
  const dockerfile = readFileSync(path.join(REPO, 'Dockerfile'), 'utf8');

  it('is multi-stage, runs as non-root and runs the bundles on plain node', () => {
    expect(checkDockerfile(dockerfile)).toEqual([]);
  });

  it('fails a single-stage image running as root', () => {
    const old = 'FROM node:20-bookworm-slim\nWORKDIR /app\nCOPY . .\nRUN pnpm install --frozen-lockfile\nCMD ["pnpm", "start:gateway"]\n';
    expect(checkDockerfile(old)).toEqual([
      'not multi-stage: build dependencies in one stage, copy the result into the final one',
      'the final stage sets no USER: it would run as root',
      'the final stage\'s ENTRYPOINT must be ["node"], with node\'s own flags at most (the chart and compose pass the bundle, dist/services/<name>/bin.js, as the argument)',
      'line 5: CMD ["pnpm", "start:gateway"]: the default must be a service\'s bundle, ["dist/services/<name>/bin.js"]',
      'the final stage installs dependencies: do it in a build stage',
      'the final stage copies nothing from the build stage',
      'no stage builds the bundles (node scripts/build.mjs)',
      'the final stage does not copy the bundles (COPY --from=<stage> /app/dist ...)',
    ]);
  });

  it('fails an image that preloads a library no step of its final stage installs', () => {
    const lost = dockerfile.replace(/\/usr\/local\/lib\/libjemalloc\.so\.2$/m, '/usr/lib/libjemalloc.so.2');
    expect(lost).not.toEqual(dockerfile);
    expect(checkDockerfile(lost)).toEqual([expect.stringMatching(/LD_PRELOAD=\/usr\/local\/lib\/libjemalloc\.so\.2, but no RUN of the final stage before it puts that file there/)]);
  });

  it('starts the services with the node flags of their start scripts', () => {
    const scripts = (JSON.parse(readFileSync(path.join(REPO, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
    const flags = startFlags(scripts);
    expect(flags).toEqual(['--max-semi-space-size=16']);
    expect(checkDockerfile(dockerfile, scripts)).toEqual([]);
    const bare = dockerfile.replace(/^ENTRYPOINT .*$/m, 'ENTRYPOINT ["node"]');
    expect(checkDockerfile(bare, scripts)).toEqual([
      expect.stringMatching(/ENTRYPOINT \["node"\]: node's flags must be those pnpm start:<service> gives the services \(--max-semi-space-size=16\)/),
    ]);
    expect(startFlags({ ...scripts, 'start:gateway': 'node dist/services/gateway/bin.js' })).toMatch(/give the services different node flags/);
    expect(checkDockerfile(dockerfile, { ...scripts, 'start:gateway': 'node dist/services/gateway/bin.js' })).toEqual([
      expect.stringMatching(/give the services different node flags/),
    ]);
  });

  it('fails an image that runs TypeScript through tsx', () => {
    const tsx = dockerfile.replace(/^ENTRYPOINT .*$/m, 'ENTRYPOINT ["node", "--import", "tsx"]');
    expect(tsx).not.toEqual(dockerfile);
    expect(checkDockerfile(tsx)).toEqual([
      expect.stringMatching(/ENTRYPOINT must be \["node"\]/),
      expect.stringMatching(/ENTRYPOINT \["node", "--import", "tsx"\]: the image runs bundles on plain node, without tsx/),
    ]);
  });
});
