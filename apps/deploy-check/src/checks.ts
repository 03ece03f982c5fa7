import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, loadChart, renderChart, type RenderOptions } from './render.js';
import { validateObjects, type ValidateOptions } from './validate.js';
import { checkComposeFleet, InterpolationError, loadCompose, secretDefaults, validateComposeSchema } from './compose.js';
import { checkDockerfile } from './dockerfile.js';

/** Every check `pnpm deploy:check` runs, as lines of output and one verdict. */

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const CHART_DIR = path.join(REPO, 'deploy/helm/dws');

/** Stand-ins passed explicitly: the chart has no defaults for them. Not secrets of any deployment. */
export const TEST_VALUES = {
  secrets: { sealKey: 'deploy-check-dummy-seal-key-not-secret' },
  postgres: { url: 'postgres://dws:dummy@postgres.example:5432/dws' },
  nats: { url: 'nats://nats.example:4222' },
};

export interface Case {
  name: string;
  render: RenderOptions;
  validate?: ValidateOptions;
}

export const CASES: Case[] = [
  { name: 'defaults', render: { set: TEST_VALUES } },
  {
    name: 'nats-cluster',
    render: {
      valuesFiles: [path.join(CHART_DIR, 'values-nats-cluster.yaml')],
      set: { secrets: TEST_VALUES.secrets, postgres: TEST_VALUES.postgres },
    },
  },
  {
    // The other branches: secrets kept outside the chart, the queue-depth metric, fixed replicas, TLS.
    name: 'existing-secrets',
    render: {
      releaseName: 'prod',
      set: {
        secrets: { existingSecret: 'dws-secrets' },
        postgres: { existingSecret: 'dws-postgres', existingSecretKey: 'url' },
        nats: { existingSecret: 'dws-nats' },
        services: {
          scheduler: { autoscaling: { queueDepth: { enabled: true } } },
          'webhook-dispatcher': { autoscaling: { enabled: false }, replicas: 1, podDisruptionBudget: { enabled: false } },
        },
        ingress: {
          className: 'nginx',
          host: 'dws.example.com',
          tls: [{ hosts: ['dws.example.com'], secretName: 'dws-tls' }],
          annotations: { 'nginx.ingress.kubernetes.io/proxy-read-timeout': '3600' },
        },
        imagePullSecrets: [{ name: 'registry' }],
      },
    },
    validate: { external: { secrets: ['dws-secrets', 'dws-postgres', 'dws-nats'] } },
  },
];

export interface Report {
  lines: string[];
  ok: boolean;
}

export async function runChecks(): Promise<Report> {
  const lines: string[] = [];
  let ok = true;
  const pass = (what: string) => lines.push(`ok    ${what}`);
  const fail = (what: string, problems: string[]) => {
    ok = false;
    lines.push(`FAIL  ${what}`, ...problems.map((p) => `        ${p}`));
  };

  const chart = loadChart(CHART_DIR);
  for (const c of CASES) {
    let rendered;
    try {
      rendered = renderChart(chart, c.render);
    } catch (e) {
      fail(`helm ${c.name}: render`, [(e as Error).message]);
      continue;
    }
    const problems = await validateObjects(rendered.objects, c.validate);
    for (const o of rendered.objects) {
      const id = describe(o);
      const mine = problems.filter((p) => p.object === id).map((p) => p.message);
      if (mine.length) fail(`helm ${c.name}: ${id} (${o.template})`, mine);
      else pass(`helm ${c.name}: ${id} (${o.template})`);
    }
    const orphans = problems.filter((p) => !rendered.objects.some((o) => describe(o) === p.object));
    if (orphans.length)
      fail(
        `helm ${c.name}: chart`,
        orphans.map((p) => `${p.object}: ${p.message}`),
      );
  }

  // No default secret: without a sealing key the chart must refuse to render.
  try {
    renderChart(chart, { set: { postgres: TEST_VALUES.postgres, nats: TEST_VALUES.nats } });
    fail('helm without secrets.sealKey: refused', ['rendered anyway']);
  } catch (e) {
    if (/secrets\.sealKey is required/.test((e as Error).message)) pass('helm without secrets.sealKey: refused');
    else fail('helm without secrets.sealKey: refused', [`failed for another reason: ${(e as Error).message}`]);
  }

  const composeText = readFileSync(path.join(REPO, 'docker-compose.yml'), 'utf8');
  try {
    const doc = loadCompose(composeText, { SERVICE_SEAL_KEY: 'dummy', POSTGRES_PASSWORD: 'dummy' });
    const problems = [...validateComposeSchema(doc), ...checkComposeFleet(doc)];
    if (problems.length) fail('compose docker-compose.yml: compose-spec schema and fleet', problems);
    else pass(`compose docker-compose.yml: compose-spec schema and fleet (${Object.keys(doc.services as object).length} services)`);
  } catch (e) {
    fail('compose docker-compose.yml: compose-spec schema and fleet', [(e as Error).message]);
  }
  const defaults = secretDefaults(composeText, ['SERVICE_SEAL_KEY', 'POSTGRES_PASSWORD']);
  let refused = false;
  try {
    loadCompose(composeText, {});
  } catch (e) {
    refused = e instanceof InterpolationError && /SERVICE_SEAL_KEY|POSTGRES_PASSWORD/.test(e.message);
  }
  if (!refused) defaults.push('interpolating with an empty environment succeeded');
  if (defaults.length) fail('compose without SERVICE_SEAL_KEY: refused', defaults);
  else pass('compose without SERVICE_SEAL_KEY: refused');

  const scripts = (JSON.parse(readFileSync(path.join(REPO, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
  const dockerProblems = checkDockerfile(readFileSync(path.join(REPO, 'Dockerfile'), 'utf8'), scripts);
  if (dockerProblems.length) fail('Dockerfile: multi-stage, non-root, bundles on plain node', dockerProblems);
  else pass('Dockerfile: multi-stage, non-root, bundles on plain node');

  return { lines, ok };
}
