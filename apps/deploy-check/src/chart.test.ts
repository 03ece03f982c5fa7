import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { loadChart, renderChart, type RenderedObject } from './render.js';
import { validateObjects } from './validate.js';
import { CASES, CHART_DIR, REPO, TEST_VALUES } from './checks.js';

type Dict = Record<string, any>; // tests reach into rendered objects freely

const SERVICES = ['gateway', 'ingest', 'scheduler', 'invoker', 'approvals', 'webhook-dispatcher'];
const chart = loadChart(CHART_DIR);
const render = (set: Dict = TEST_VALUES, valuesFiles: string[] = []) => renderChart(chart, { set, valuesFiles });
const find = (objects: RenderedObject[], kind: string, name: string): Dict => {
  const o = objects.find((x) => x.object.kind === kind && (x.object.metadata as Dict).name === name);
  if (!o) throw new Error(`no ${kind}/${name}`);
  return o.object;
};

/** The port each service listens on by default, read from its bin.ts: runStandalone('<name>', <port>, ...). */
function codePort(service: string): number {
  const src = readFileSync(path.join(REPO, 'services', service, 'src/bin.ts'), 'utf8');
  const m = /runStandalone\('([a-z-]+)', (\d+)/.exec(src);
  if (!m || m[1] !== service) throw new Error(`services/${service}/src/bin.ts: no runStandalone port`);
  return Number(m[2]);
}

/** Which backend an Ingress sends a path to: the longest matching Prefix path wins, as in Kubernetes. */
function route(ingress: Dict, requestPath: string): Dict | undefined {
  const paths = (ingress.spec.rules as Dict[]).flatMap((r) => r.http.paths as Dict[]);
  const matching = paths.filter((p) => {
    if (p.pathType === 'Exact') return p.path === requestPath;
    const prefix = (p.path as string).replace(/\/$/, '');
    return requestPath === prefix || requestPath.startsWith(prefix + '/') || p.path === '/';
  });
  matching.sort((a, b) => (b.path as string).length - (a.path as string).length);
  return matching[0]?.backend.service;
}

describe('deploy/helm/dws', () => {
  const { objects } = render();

  it('renders one Deployment, Service, PodDisruptionBudget and HPA per service, a ConfigMap, a Secret and an Ingress', () => {
    const count = (kind: string) => objects.filter((o) => o.object.kind === kind).length;
    expect([count('Deployment'), count('Service'), count('PodDisruptionBudget'), count('HorizontalPodAutoscaler')]).toEqual([6, 6, 6, 6]);
    expect([count('ConfigMap'), count('Secret'), count('Ingress')]).toEqual([1, 1, 1]);
    for (const s of SERVICES)
      expect(find(objects, 'Deployment', `dws-${s}`).spec.template.spec.containers[0].args).toEqual([`dist/services/${s}/bin.js`]);
  });

  it('refuses to render without a sealing key, naming the value to set', () => {
    expect(() => render({ postgres: TEST_VALUES.postgres, nats: TEST_VALUES.nats })).toThrow(
      /execution error at \(dws\/templates\/[a-z]+\.yaml:\d+\): secrets\.sealKey is required \(or name a Secret holding SERVICE_SEAL_KEY in secrets\.existingSecret\)/,
    );
    // Without Postgres or NATS too.
    expect(() => render({ secrets: TEST_VALUES.secrets, nats: TEST_VALUES.nats })).toThrow(
      /postgres\.url or postgres\.existingSecret is required/,
    );
    expect(() => render({ secrets: TEST_VALUES.secrets, postgres: TEST_VALUES.postgres })).toThrow(
      /nats\.url or nats\.existingSecret is required/,
    );
  });

  it('ships no secret value in values.yaml', () => {
    const values = chart.values as Dict;
    for (const [k, v] of Object.entries(values.secrets as Dict)) expect([k, v]).toEqual([k, '']);
    expect(values.postgres.url).toBe('');
  });

  it('puts the seal key in the Secret and plain settings in the ConfigMap', () => {
    const secret = find(objects, 'Secret', 'dws');
    expect(Buffer.from(secret.data.SERVICE_SEAL_KEY, 'base64').toString()).toBe(TEST_VALUES.secrets.sealKey);
    expect(Buffer.from(secret.data.DATABASE_URL, 'base64').toString()).toBe(TEST_VALUES.postgres.url);
    const cm = find(objects, 'ConfigMap', 'dws');
    expect(cm.data).toMatchObject({ HOST: '0.0.0.0', NATS_URL: TEST_VALUES.nats.url, SERVICE_AUTH: 'on' });
    expect(JSON.stringify(cm)).not.toContain(TEST_VALUES.secrets.sealKey);
  });

  it("probes /readyz and /healthz on each service's own port, the one its code listens on", () => {
    for (const s of SERVICES) {
      const c = find(objects, 'Deployment', `dws-${s}`).spec.template.spec.containers[0];
      const port = codePort(s);
      expect(c.ports).toEqual([{ name: 'http', containerPort: port, protocol: 'TCP' }]);
      expect(c.env.find((e: Dict) => e.name === 'PORT').value).toBe(String(port));
      expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'http' });
      expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
      expect(c.resources.requests.cpu).toBeDefined();
      expect(c.resources.limits.memory).toBeDefined();
      expect(find(objects, 'Service', `dws-${s}`).spec.ports[0]).toMatchObject({ port, targetPort: 'http' });
    }
  });

  it('sends /v1/connect through the gateway, which hands it to the invoker Service', () => {
    const ingress = find(objects, 'Ingress', 'dws');
    // The invoker refuses a Connect upgrade without the gateway's signed hop header
    // (services/invoker/src/handlers/connect-hub.ts), so the gateway must receive it first.
    expect(route(ingress, '/v1/connect')).toEqual({ name: 'dws-gateway', port: { number: codePort('gateway') } });
    expect(route(ingress, '/v1/runs')).toEqual({ name: 'dws-gateway', port: { number: codePort('gateway') } });
    const invokerUrl = new URL(find(objects, 'ConfigMap', 'dws').data.SERVICE_INVOKER_URL as string);
    const invoker = find(objects, 'Service', invokerUrl.hostname);
    expect(invoker.spec.selector['app.kubernetes.io/component']).toBe('invoker');
    expect(invoker.spec.ports.map((p: Dict) => p.port)).toContain(Number(invokerUrl.port));
  });

  it('scales every service on CPU, and the scheduler on a documented metric when asked', async () => {
    for (const s of SERVICES) {
      const hpa = find(objects, 'HorizontalPodAutoscaler', `dws-${s}`);
      expect(hpa.apiVersion).toBe('autoscaling/v2');
      expect(hpa.spec.metrics).toEqual([
        { type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: 70 } } },
      ]);
      // The HPA owns the replica count.
      expect(find(objects, 'Deployment', `dws-${s}`).spec.replicas).toBeUndefined();
    }
    const withQueue = render({ ...TEST_VALUES, services: { scheduler: { autoscaling: { queueDepth: { enabled: true } } } } }).objects;
    const metric = find(withQueue, 'HorizontalPodAutoscaler', 'dws-scheduler').spec.metrics[1];
    expect(metric.type).toBe('Pods');
    const documented = [...readFileSync(path.join(REPO, 'docs/metrics.md'), 'utf8').matchAll(/^\| `([a-z_]+)` \|/gm)].map((m) => m[1]);
    expect(documented).toContain(metric.pods.metric.name);
    expect(await validateObjects(withQueue, { skipUnknownFields: true })).toEqual([]);
  });

  it('lists three NATS servers with values-nats-cluster.yaml, and keeps three copies of each stream', () => {
    const { objects: cluster } = render({ secrets: TEST_VALUES.secrets, postgres: TEST_VALUES.postgres }, [
      path.join(CHART_DIR, 'values-nats-cluster.yaml'),
    ]);
    const data = find(cluster, 'ConfigMap', 'dws').data;
    const servers = (data.NATS_URL as string).split(',');
    expect(servers).toHaveLength(3);
    for (const s of servers) expect(s).toMatch(/^nats:\/\/nats-[0-2]\.[a-z.-]+:4222$/);
    expect(data.SERVICE_BUS_REPLICAS).toBe('3');
    // The rest of the defaults' config stays.
    expect(data.SERVICE_RUN_LEASE_MS).toBe('15000');
  });

  it('reads everything from existing Secrets when told to, and makes no Secret', () => {
    const c = CASES.find((x) => x.name === 'existing-secrets');
    const { objects: ext } = renderChart(chart, c?.render ?? {});
    expect(ext.some((o) => o.object.kind === 'Secret')).toBe(false);
    const container = find(ext, 'Deployment', 'prod-dws-gateway').spec.template.spec.containers[0];
    expect(container.envFrom).toContainEqual({ secretRef: { name: 'dws-secrets' } });
    expect(container.env).toContainEqual({ name: 'DATABASE_URL', valueFrom: { secretKeyRef: { name: 'dws-postgres', key: 'url' } } });
    expect(container.env).toContainEqual({ name: 'NATS_URL', valueFrom: { secretKeyRef: { name: 'dws-nats', key: 'NATS_URL' } } });
    expect(find(ext, 'ConfigMap', 'prod-dws').data.NATS_URL).toBeUndefined();
    // Autoscaling off: a fixed replica count and no HPA.
    expect(find(ext, 'Deployment', 'prod-dws-webhook-dispatcher').spec.replicas).toBe(1);
    expect(
      ext.some((o) => o.object.kind === 'HorizontalPodAutoscaler' && (o.object.metadata as Dict).name === 'prod-dws-webhook-dispatcher'),
    ).toBe(false);
  });

  it('validates every object of every case the CLI renders', async () => {
    for (const c of CASES) {
      const rendered = renderChart(chart, c.render);
      expect([c.name, await validateObjects(rendered.objects, c.validate)]).toEqual([c.name, []]);
    }
  }, 60_000);
});
