import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import type { RenderedObject } from './render.js';

/**
 * Checks rendered Kubernetes objects three ways:
 *  1. schema: kubernetes-models' validators (the Kubernetes OpenAPI schema compiled
 *     with ajv): types, required fields, enums, formats;
 *  2. unknown fields: the same package's TypeScript types, with the compiler's excess
 *     property check (the OpenAPI schema allows any extra field, the API server drops
 *     or refuses it; a typo like `readinesProbe` would otherwise pass);
 *  3. references between objects, which no schema sees: selectors that match pods,
 *     Service and Ingress ports, HPA targets, ConfigMaps and Secrets named in env.
 */

type Dict = Record<string, unknown>;

export interface Problem {
  /** "Kind/name" of the object, or "chart" for a problem between objects. */
  object: string;
  message: string;
}

export interface ValidateOptions {
  /** Secrets and ConfigMaps that exist outside the chart (existingSecret values). */
  external?: { secrets?: string[]; configMaps?: string[] };
  /** Skip the TypeScript unknown-field pass (it costs ~2 s). */
  skipUnknownFields?: boolean;
}

const isDict = (v: unknown): v is Dict => typeof v === 'object' && v !== null && !Array.isArray(v);
const dict = (v: unknown): Dict => (isDict(v) ? v : {});
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const nameOf = (o: Dict): string => `${String(o.kind)}/${String(dict(o.metadata).name)}`;

interface ModelClass {
  new (data: unknown): { validate(): void };
}

/** kubernetes-models lays its modules out by apiVersion: apps/v1/Deployment, v1/Service. */
async function modelFor(apiVersion: string, kind: string): Promise<ModelClass | undefined> {
  if (!/^[a-z0-9.]+(\/[a-z0-9]+)?$/.test(apiVersion) || !/^[A-Za-z]+$/.test(kind)) return undefined;
  try {
    const mod = (await import(`kubernetes-models/${apiVersion}/${kind}`)) as Record<string, unknown>;
    return mod[kind] as ModelClass | undefined;
  } catch {
    return undefined;
  }
}

/** Schema validation of one object; the messages name the failing path. */
export async function validateSchema(o: Dict): Promise<string[]> {
  const apiVersion = o.apiVersion;
  const kind = o.kind;
  if (typeof apiVersion !== 'string' || typeof kind !== 'string') return ['apiVersion and kind must be strings'];
  const Model = await modelFor(apiVersion, kind);
  if (!Model) return [`no Kubernetes schema for ${apiVersion} ${kind}`];
  try {
    new Model(o).validate();
    return [];
  } catch (e) {
    const errors = (e as { errors?: { instancePath?: string; message?: string; params?: unknown }[] }).errors;
    if (!errors) return [(e as Error).message];
    return errors.map((x) => `${x.instancePath || '/'} ${x.message ?? ''} ${x.params ? JSON.stringify(x.params) : ''}`.trim());
  }
}

const HERE = path.dirname(fileURLToPath(import.meta.url));

/**
 * Fields the Kubernetes types do not have, at any depth, found by type-checking each object
 * as an object literal against kubernetes-models' interface for its kind.
 */
export function unknownFields(objects: Dict[]): Map<number, string[]> {
  const file = path.join(HERE, '__rendered_objects__.ts');
  const lines: string[] = [];
  const checked: number[] = [];
  objects.forEach((o, i) => {
    const { apiVersion, kind } = o;
    if (typeof apiVersion !== 'string' || typeof kind !== 'string' || !/^[a-z0-9./]+$/.test(apiVersion) || !/^[A-Za-z]+$/.test(kind))
      return;
    lines.push(`import type { I${kind} as T${i} } from 'kubernetes-models/${apiVersion}/${kind}';`);
    checked.push(i);
  });
  for (const i of checked) {
    lines.push(...`export const o${i}: T${i} = ${JSON.stringify(objects[i], null, 1)};`.split('\n'));
  }
  const text = lines.join('\n');
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: [],
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  const fileExists = host.fileExists.bind(host);
  host.getSourceFile = (f, lang, ...rest) => (f === file ? ts.createSourceFile(f, text, lang) : getSourceFile(f, lang, ...rest));
  host.fileExists = (f) => f === file || fileExists(f);
  const program = ts.createProgram([file], options, host);
  const checker = program.getTypeChecker();
  const out = new Map<number, string[]>();
  const report = (index: number, message: string) => out.set(index, [...(out.get(index) ?? []), message]);
  // A module that does not resolve means the kind has no types: report it, since nothing was checked.
  for (const d of program.getSemanticDiagnostics(program.getSourceFile(file))) {
    if (d.code === 2307 || d.code === 2305 || d.code === 2724) report(-1, ts.flattenDiagnosticMessageText(d.messageText, ' '));
  }
  // Walk every object literal against the type it is assigned to; the compiler's own excess
  // property error stops at the first one per object, this finds them all.
  const walk = (node: ts.Node, at: string, index: number) => {
    if (ts.isObjectLiteralExpression(node)) {
      const contextual = checker.getContextualType(node);
      const type = contextual ? checker.getNonNullableType(contextual) : undefined;
      const open =
        !type ||
        type.flags & ts.TypeFlags.Any ||
        checker.getIndexInfosOfType(type).length > 0 ||
        (type.isUnion() && type.types.some((t) => !(t.flags & ts.TypeFlags.Object)));
      for (const prop of node.properties) {
        if (!ts.isPropertyAssignment(prop)) continue;
        const key = ts.isStringLiteral(prop.name) ? prop.name.text : prop.name.getText();
        if (!open && type && !checker.getPropertyOfType(type, key)) report(index, `${at}/${key}: unknown field`);
        walk(prop.initializer, `${at}/${key}`, index);
      }
    } else if (ts.isArrayLiteralExpression(node)) node.elements.forEach((e, k) => walk(e, `${at}/${k}`, index));
  };
  const source = program.getSourceFile(file);
  for (const statement of source?.statements ?? []) {
    if (!ts.isVariableStatement(statement)) continue;
    for (const decl of statement.declarationList.declarations) {
      const index = Number(decl.name.getText().slice(1));
      if (decl.initializer) walk(decl.initializer, '', index);
    }
  }
  return out;
}

// ---------- references between objects ----------

const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const LABEL_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const PORT_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const ENV_NAME = /^[-._a-zA-Z][-._a-zA-Z0-9]*$/;

function labelProblems(labels: unknown, where: string): string[] {
  const out: string[] = [];
  for (const [k, v] of Object.entries(dict(labels))) {
    const slash = k.lastIndexOf('/');
    const prefix = slash === -1 ? undefined : k.slice(0, slash);
    const name = slash === -1 ? k : k.slice(slash + 1);
    if ((prefix !== undefined && (prefix.length > 253 || !DNS1123_SUBDOMAIN.test(prefix))) || name.length > 63 || !LABEL_NAME.test(name))
      out.push(`${where}: invalid label key "${k}"`);
    if (typeof v !== 'string' || v.length > 63 || (v !== '' && !LABEL_NAME.test(v)))
      out.push(`${where}: invalid value of label "${k}": ${JSON.stringify(v)}`);
  }
  return out;
}

const QUANTITY = /^([+-]?\d+(\.\d+)?|[+-]?\.\d+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+)?$/;
const FACTORS: Record<string, number> = {
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** A Kubernetes quantity ("250m", "1Gi", 2) as a number, or undefined when malformed. */
export function parseQuantity(q: unknown): number | undefined {
  if (typeof q === 'number') return q;
  if (typeof q !== 'string') return undefined;
  const m = QUANTITY.exec(q);
  if (!m) return undefined;
  const suffix = m[3] ?? '';
  if (/^[eE]/.test(suffix)) return Number(m[1]) * 10 ** Number(suffix.slice(1));
  return Number(m[1]) * (FACTORS[suffix] ?? 1);
}

function matches(selector: Dict, labels: Dict): boolean {
  const entries = Object.entries(selector);
  return entries.length > 0 && entries.every(([k, v]) => labels[k] === v);
}

interface Pods {
  deployment: Dict;
  labels: Dict;
  containers: Dict[];
}

/** Problems no per-object schema can see. */
export function checkReferences(objects: Dict[], opts: ValidateOptions = {}): Problem[] {
  const problems: Problem[] = [];
  const add = (o: Dict | string, message: string) => problems.push({ object: typeof o === 'string' ? o : nameOf(o), message });
  const byKind = (kind: string) => objects.filter((o) => o.kind === kind);
  const seen = new Set<string>();
  for (const o of objects) {
    const id = `${String(o.apiVersion)} ${nameOf(o)}`;
    if (seen.has(id)) add(o, 'defined twice');
    seen.add(id);
    const name = dict(o.metadata).name;
    const nameRule = o.kind === 'Service' ? DNS1035_LABEL : DNS1123_SUBDOMAIN;
    if (typeof name !== 'string' || !nameRule.test(name) || name.length > (o.kind === 'Service' ? 63 : 253))
      add(o, `invalid metadata.name ${JSON.stringify(name)}`);
    for (const p of labelProblems(dict(o.metadata).labels, 'metadata.labels')) add(o, p);
  }

  const secrets = new Map(byKind('Secret').map((s) => [String(dict(s.metadata).name), { ...dict(s.data), ...dict(s.stringData) }]));
  const configMaps = new Map(byKind('ConfigMap').map((c) => [String(dict(c.metadata).name), dict(c.data)]));
  const externalSecrets = new Set(opts.external?.secrets ?? []);
  const externalConfigMaps = new Set(opts.external?.configMaps ?? []);

  const pods: Pods[] = [];
  for (const d of byKind('Deployment')) {
    const spec = dict(d.spec);
    const template = dict(spec.template);
    const labels = dict(dict(template.metadata).labels);
    const podSpec = dict(template.spec);
    const containers = list(podSpec.containers).map(dict);
    pods.push({ deployment: d, labels, containers });
    for (const p of labelProblems(labels, 'spec.template.metadata.labels')) add(d, p);
    const selector = dict(dict(spec.selector).matchLabels);
    if (!matches(selector, labels)) add(d, 'spec.selector.matchLabels does not match the pod template labels');
    const volumes = new Set(list(podSpec.volumes).map((v) => dict(v).name));
    for (const c of containers) {
      const cname = String(c.name);
      const ports = list(c.ports).map(dict);
      const portNames = new Set(ports.map((p) => p.name).filter((n) => n !== undefined));
      for (const p of ports)
        if (p.name !== undefined && (typeof p.name !== 'string' || p.name.length > 15 || !PORT_NAME.test(p.name) || !/[a-z]/.test(p.name)))
          add(d, `container ${cname}: invalid port name ${JSON.stringify(p.name)}`);
      for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe']) {
        const port = dict(dict(c[probe]).httpGet).port;
        if (typeof port === 'string' && !portNames.has(port))
          add(d, `container ${cname}: ${probe} uses port "${port}", which the container does not name`);
        if (typeof port === 'number' && !ports.some((p) => p.containerPort === port))
          add(d, `container ${cname}: ${probe} uses port ${port}, which the container does not expose`);
      }
      const names = new Set<string>();
      for (const e of list(c.env).map(dict)) {
        const n = String(e.name);
        if (!ENV_NAME.test(n)) add(d, `container ${cname}: invalid env name ${JSON.stringify(e.name)}`);
        if (names.has(n)) add(d, `container ${cname}: env ${n} given twice`);
        names.add(n);
        const from = dict(e.valueFrom);
        const sk = dict(from.secretKeyRef);
        if (sk.name !== undefined && sk.optional !== true) {
          const data = secrets.get(String(sk.name));
          if (!data && !externalSecrets.has(String(sk.name)))
            add(d, `container ${cname}: env ${n} reads Secret "${String(sk.name)}", which is neither rendered nor declared external`);
          if (data && !(String(sk.key) in data))
            add(d, `container ${cname}: env ${n} reads key "${String(sk.key)}", which Secret "${String(sk.name)}" does not hold`);
        }
        const ck = dict(from.configMapKeyRef);
        if (ck.name !== undefined && ck.optional !== true) {
          const data = configMaps.get(String(ck.name));
          if (!data && !externalConfigMaps.has(String(ck.name)))
            add(d, `container ${cname}: env ${n} reads ConfigMap "${String(ck.name)}", which is neither rendered nor declared external`);
          if (data && !(String(ck.key) in data))
            add(d, `container ${cname}: env ${n} reads key "${String(ck.key)}", which ConfigMap "${String(ck.name)}" does not hold`);
        }
      }
      for (const ef of list(c.envFrom).map(dict)) {
        const s = dict(ef.secretRef);
        if (s.name !== undefined && s.optional !== true && !secrets.has(String(s.name)) && !externalSecrets.has(String(s.name)))
          add(d, `container ${cname}: envFrom Secret "${String(s.name)}" is neither rendered nor declared external`);
        const cm = dict(ef.configMapRef);
        if (cm.name !== undefined && cm.optional !== true && !configMaps.has(String(cm.name)) && !externalConfigMaps.has(String(cm.name)))
          add(d, `container ${cname}: envFrom ConfigMap "${String(cm.name)}" is neither rendered nor declared external`);
      }
      for (const m of list(c.volumeMounts).map(dict))
        if (!volumes.has(m.name)) add(d, `container ${cname}: volumeMount "${String(m.name)}" names no volume`);
      const res = dict(c.resources);
      for (const [r, limit] of Object.entries(dict(res.limits))) {
        const request = dict(res.requests)[r];
        const l = parseQuantity(limit);
        const q = request === undefined ? undefined : parseQuantity(request);
        if (l === undefined) add(d, `container ${cname}: limits.${r} ${JSON.stringify(limit)} is not a quantity`);
        if (request !== undefined && q === undefined)
          add(d, `container ${cname}: requests.${r} ${JSON.stringify(request)} is not a quantity`);
        if (l !== undefined && q !== undefined && q > l)
          add(d, `container ${cname}: requests.${r} (${String(request)}) exceeds limits.${r} (${String(limit)})`);
      }
    }
  }

  const podsOf = (selector: Dict) => pods.filter((p) => matches(selector, p.labels));
  const services = new Map<string, Dict>();
  for (const s of byKind('Service')) {
    services.set(String(dict(s.metadata).name), s);
    const spec = dict(s.spec);
    const selected = podsOf(dict(spec.selector));
    if (!selected.length) {
      add(s, 'spec.selector matches the pods of no Deployment');
      continue;
    }
    for (const port of list(spec.ports).map(dict)) {
      const target = port.targetPort ?? port.port;
      for (const p of selected) {
        const ports = p.containers.flatMap((c) => list(c.ports).map(dict));
        const ok = typeof target === 'string' ? ports.some((cp) => cp.name === target) : ports.some((cp) => cp.containerPort === target);
        if (!ok) add(s, `targetPort ${String(target)} is not a container port of ${nameOf(p.deployment)}`);
      }
    }
  }

  for (const ing of byKind('Ingress')) {
    const spec = dict(ing.spec);
    const backends = [
      dict(spec.defaultBackend),
      ...list(spec.rules).flatMap((r) => list(dict(dict(r).http).paths).map((p) => dict(dict(p).backend))),
    ];
    for (const b of backends) {
      const svc = dict(b.service);
      if (svc.name === undefined) continue;
      const target = services.get(String(svc.name));
      if (!target) {
        add(ing, `backend Service "${String(svc.name)}" is not rendered`);
        continue;
      }
      const port = dict(svc.port);
      const ports = list(dict(target.spec).ports).map(dict);
      if (!ports.some((p) => (port.number !== undefined ? p.port === port.number : p.name === port.name)))
        add(ing, `backend port ${JSON.stringify(port)} is not a port of Service "${String(svc.name)}"`);
    }
  }

  const deployments = new Map(pods.map((p) => [String(dict(p.deployment.metadata).name), p]));
  for (const h of byKind('HorizontalPodAutoscaler')) {
    const spec = dict(h.spec);
    const ref = dict(spec.scaleTargetRef);
    const target = ref.kind === 'Deployment' ? deployments.get(String(ref.name)) : undefined;
    if (!target) add(h, `scaleTargetRef ${String(ref.kind)}/${String(ref.name)} is not a rendered Deployment`);
    if (typeof spec.minReplicas === 'number' && typeof spec.maxReplicas === 'number' && spec.minReplicas > spec.maxReplicas)
      add(h, 'minReplicas exceeds maxReplicas');
    for (const m of list(spec.metrics).map(dict)) {
      const r = dict(m.resource);
      // A utilization target is a share of the request: without one the HPA cannot compute it.
      if (m.type === 'Resource' && dict(r.target).type === 'Utilization' && target)
        for (const c of target.containers)
          if (dict(dict(c.resources).requests)[String(r.name)] === undefined)
            add(h, `targets ${String(r.name)} utilization but container ${String(c.name)} requests no ${String(r.name)}`);
    }
    if (target && dict(target.deployment.spec).replicas !== undefined)
      add(h, `${nameOf(target.deployment)} also sets spec.replicas, which each upgrade would reset`);
  }

  for (const pdb of byKind('PodDisruptionBudget')) {
    if (!podsOf(dict(dict(dict(pdb.spec).selector).matchLabels)).length) add(pdb, 'selector matches the pods of no Deployment');
  }
  return problems;
}

/** Every check on every object; an empty list means all passed. */
export async function validateObjects(objects: RenderedObject[], opts: ValidateOptions = {}): Promise<Problem[]> {
  const docs = objects.map((o) => o.object);
  const problems: Problem[] = [];
  for (const o of docs) for (const message of await validateSchema(o)) problems.push({ object: nameOf(o), message });
  if (!opts.skipUnknownFields) {
    for (const [i, messages] of unknownFields(docs)) {
      const o = docs[i];
      for (const message of messages) problems.push({ object: o ? nameOf(o) : 'chart', message });
    }
  }
  problems.push(...checkReferences(docs, opts));
  return problems;
}
