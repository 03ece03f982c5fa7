import { describe, expect, it } from '@jest/globals';
import { loadChart, renderChart, type RenderedObject } from './render.js';
import { checkReferences, parseQuantity, unknownFields, validateObjects, validateSchema } from './validate.js';
import { CHART_DIR, TEST_VALUES } from './checks.js';

type Dict = Record<string, any>; // tests reach into rendered objects freely

/** A fresh copy of the default render, to break one thing at a time. */
function fresh(): RenderedObject[] {
  return structuredClone(renderChart(loadChart(CHART_DIR), { set: TEST_VALUES }).objects);
}
const get = (objects: RenderedObject[], kind: string, name: string): Dict =>
  (objects.find((o) => o.object.kind === kind && (o.object.metadata as Dict).name === name) as RenderedObject).object;

describe('validation of rendered objects', () => {
  it('passes the chart as rendered', async () => {
    expect(await validateObjects(fresh(), { skipUnknownFields: true })).toEqual([]);
  });

  it('fails a field of the wrong type', async () => {
    const objects = fresh();
    get(objects, 'Deployment', 'dws-gateway').spec.template.spec.containers[0].ports[0].containerPort = '8288';
    get(objects, 'Service', 'dws-invoker').spec.ports[0].port = 'http';
    const problems = await validateObjects(objects, { skipUnknownFields: true });
    expect(problems).toContainEqual({
      object: 'Deployment/dws-gateway',
      message: expect.stringMatching(/containers\/0\/ports\/0\/containerPort must be integer/),
    });
    expect(problems).toContainEqual({ object: 'Service/dws-invoker', message: expect.stringMatching(/ports\/0\/port must be integer/) });
  });

  it('fails a missing required field and an unknown kind', async () => {
    expect(
      await validateSchema({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'x' }, spec: { template: {} } }),
    ).toContainEqual(expect.stringMatching(/^\/spec must have required property selector/));
    expect(await validateSchema({ apiVersion: 'apps/v1', kind: 'Deploymint', metadata: { name: 'x' } })).toEqual([
      'no Kubernetes schema for apps/v1 Deploymint',
    ]);
  });

  it('finds every unknown field, at any depth', () => {
    const objects = fresh().map((o) => o.object);
    const d = objects.findIndex((o) => o.kind === 'Deployment');
    const dep = objects[d] as Dict;
    dep.spec.replica = 2;
    dep.spec.template.spec.containers[0].readinesProbe = dep.spec.template.spec.containers[0].readinessProbe;
    dep.metadata.labels['free-form'] = 'labels are maps: any key is fine';
    const found = unknownFields(objects);
    expect([...found.keys()]).toEqual([d]);
    expect(found.get(d)?.sort()).toEqual(['/spec/replica: unknown field', '/spec/template/spec/containers/0/readinesProbe: unknown field']);
  }, 30_000);

  it('fails a Service that selects no pods and a probe on a port the container does not name', () => {
    const objects = fresh();
    get(objects, 'Service', 'dws-ingest').spec.selector['app.kubernetes.io/component'] = 'ingset';
    get(objects, 'Deployment', 'dws-approvals').spec.template.spec.containers[0].readinessProbe.httpGet.port = 'health';
    const problems = checkReferences(objects.map((o) => o.object));
    expect(problems).toEqual([
      {
        object: 'Deployment/dws-approvals',
        message: 'container approvals: readinessProbe uses port "health", which the container does not name',
      },
      { object: 'Service/dws-ingest', message: 'spec.selector matches the pods of no Deployment' },
    ]);
  });

  it('fails an Ingress to a missing Service or port, and an HPA on CPU without CPU requests', () => {
    const objects = fresh();
    get(objects, 'Ingress', 'dws').spec.rules[0].http.paths[0].backend.service.port.number = 80;
    delete get(objects, 'Deployment', 'dws-scheduler').spec.template.spec.containers[0].resources.requests.cpu;
    get(objects, 'HorizontalPodAutoscaler', 'dws-invoker').spec.scaleTargetRef.name = 'dws-invokr';
    const messages = checkReferences(objects.map((o) => o.object)).map((p) => `${p.object}: ${p.message}`);
    expect(messages).toEqual([
      'Ingress/dws: backend port {"number":80} is not a port of Service "dws-gateway"',
      'HorizontalPodAutoscaler/dws-invoker: scaleTargetRef Deployment/dws-invokr is not a rendered Deployment',
      'HorizontalPodAutoscaler/dws-scheduler: targets cpu utilization but container scheduler requests no cpu',
    ]);
  });

  it('fails requests above limits, a Secret nobody renders, and a selector that misses the template', () => {
    const objects = fresh();
    const dep = get(objects, 'Deployment', 'dws-gateway');
    dep.spec.template.spec.containers[0].resources.requests.memory = '2Gi';
    dep.spec.template.spec.containers[0].envFrom[1].secretRef.name = 'elsewhere';
    dep.spec.selector.matchLabels['app.kubernetes.io/component'] = 'gw';
    const messages = checkReferences(objects.map((o) => o.object))
      .filter((p) => p.object === 'Deployment/dws-gateway')
      .map((p) => p.message);
    expect(messages).toEqual([
      'spec.selector.matchLabels does not match the pod template labels',
      'container gateway: envFrom Secret "elsewhere" is neither rendered nor declared external',
      'container gateway: requests.memory (2Gi) exceeds limits.memory (1Gi)',
    ]);
    // Declared as managed outside the chart, the Secret is fine.
    expect(
      checkReferences(
        objects.map((o) => o.object),
        { external: { secrets: ['elsewhere'] } },
      ).map((p) => p.message),
    ).not.toContainEqual(expect.stringMatching(/elsewhere/));
  });

  it('parses quantities', () => {
    expect([parseQuantity('250m'), parseQuantity('1Gi'), parseQuantity(2), parseQuantity('1e3'), parseQuantity('1 Gi')]).toEqual([
      0.25,
      2 ** 30,
      2,
      1000,
      undefined,
    ]);
  });
});
