import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { checkComposeFleet, interpolate, InterpolationError, loadCompose, secretDefaults, validateComposeSchema } from './compose.js';
import { checkDockerfile, lockedTsxVersion } from './dockerfile.js';
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
      'services.scheduler: command must be ["services/scheduler/src/bin.ts"] (the image\'s entrypoint is node --import tsx)',
      'services.nats: JetStream is not enabled (-js)',
    ]);
  });
});

describe('Dockerfile', () => {
  const dockerfile = readFileSync(path.join(REPO, 'Dockerfile'), 'utf8');
  const lock = readFileSync(path.join(REPO, 'pnpm-lock.yaml'), 'utf8');

  it('is multi-stage, runs as non-root and installs the locked tsx', () => {
    expect(lockedTsxVersion(lock)).toMatch(/^\d+\.\d+\.\d+$/);
    expect(checkDockerfile(dockerfile, lock)).toEqual([]);
  });

  it('fails a single-stage image running as root', () => {
    const old = 'FROM node:20-bookworm-slim\nWORKDIR /app\nCOPY . .\nRUN pnpm install --frozen-lockfile\nCMD ["pnpm", "start:gateway"]\n';
    expect(checkDockerfile(old, lock)).toEqual([
      'not multi-stage: build dependencies in one stage, copy the result into the final one',
      'the final stage sets no USER: it would run as root',
      'the final stage\'s ENTRYPOINT must be ["node", "--import", "tsx"] (the chart and compose pass the service file as the argument)',
      'the final stage installs dependencies: do it in a build stage',
      'the final stage copies nothing from the build stage',
      'no ARG TSX_VERSION',
    ]);
  });

  it('fails a tsx version that drifted from the lockfile', () => {
    const drifted = dockerfile.replace(/ARG TSX_VERSION=\S+/, 'ARG TSX_VERSION=0.0.1');
    expect(checkDockerfile(drifted, lock)).toEqual([expect.stringMatching(/TSX_VERSION=0\.0\.1, but pnpm-lock\.yaml has tsx /)]);
  });
});
