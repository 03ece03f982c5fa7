import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments, parse } from 'yaml';
import { executeNamed, parseTemplate, TemplateError, type ExecContext } from './template.js';

/**
 * `helm template` for deploy/helm/dws without helm: loads Chart.yaml and the values,
 * renders every template with the engine of template.ts, and parses the output the
 * way helm does (YAML 1.1, one object per `---` document, empty documents dropped).
 */

export { TemplateError } from './template.js';

type Dict = Record<string, unknown>;

export interface Chart {
  dir: string;
  /** Chart.yaml as written. */
  meta: Dict;
  /** values.yaml. */
  values: Dict;
  /** Template files by path relative to templates/, e.g. "deployment.yaml". */
  templates: Map<string, string>;
}

export interface RenderOptions {
  releaseName?: string;
  namespace?: string;
  /** Extra values files, merged over values.yaml in order (helm -f). */
  valuesFiles?: string[];
  /** Merged last (like --set, given as a nested object); a null deletes a key, as in helm. */
  set?: Dict;
}

export interface RenderedObject {
  /** The template it came from, e.g. "dws/templates/deployment.yaml". */
  template: string;
  object: Dict;
}

export interface Rendered {
  values: Dict;
  /** Template output by template name (files whose name starts with "_" are not rendered). */
  manifests: Map<string, string>;
  objects: RenderedObject[];
}

const isDict = (v: unknown): v is Dict => typeof v === 'object' && v !== null && !Array.isArray(v);

/** YAML as helm reads it: YAML 1.1 (so `on` is a boolean), merge keys, duplicate keys refused. */
export function parseYaml(text: string, where: string): unknown {
  try {
    return parse(text, { version: '1.1', merge: true, uniqueKeys: true }) as unknown;
  } catch (e) {
    throw new Error(`${where}: ${(e as Error).message}`);
  }
}

export function loadChart(dir: string): Chart {
  const meta = parseYaml(readFileSync(path.join(dir, 'Chart.yaml'), 'utf8'), 'Chart.yaml');
  if (!isDict(meta) || typeof meta.name !== 'string' || typeof meta.version !== 'string')
    throw new Error(`${dir}/Chart.yaml: name and version are required`);
  const values = parseYaml(readFileSync(path.join(dir, 'values.yaml'), 'utf8'), 'values.yaml') ?? {};
  if (!isDict(values)) throw new Error(`${dir}/values.yaml: not a map`);
  const templates = new Map<string, string>();
  const walk = (sub: string) => {
    for (const entry of readdirSync(path.join(dir, 'templates', sub)).sort()) {
      const rel = sub ? `${sub}/${entry}` : entry;
      if (statSync(path.join(dir, 'templates', rel)).isDirectory()) walk(rel);
      else templates.set(rel, readFileSync(path.join(dir, 'templates', rel), 'utf8'));
    }
  };
  walk('');
  return { dir, meta, values, templates };
}

/** helm's coalescing of values: maps merge deeply, anything else replaces, null deletes. */
export function mergeValues(base: Dict, over: Dict): Dict {
  const out: Dict = { ...base };
  for (const [k, v] of Object.entries(over)) {
    if (v === null) delete out[k];
    else if (isDict(v) && isDict(out[k])) out[k] = mergeValues(out[k], v);
    else out[k] = v;
  }
  return out;
}

export function renderChart(chart: Chart, opts: RenderOptions = {}): Rendered {
  let values = chart.values;
  for (const file of opts.valuesFiles ?? []) {
    const extra = parseYaml(readFileSync(file, 'utf8'), file) ?? {};
    if (!isDict(extra)) throw new Error(`${file}: not a map`);
    values = mergeValues(values, extra);
  }
  if (opts.set) values = mergeValues(values, opts.set);

  const name = chart.meta.name as string;
  const basePath = `${name}/templates`;
  const named = new Map<string, ReturnType<typeof parseTemplate>['nodes']>();
  for (const [file, src] of chart.templates) {
    const full = `${basePath}/${file}`;
    const { nodes, defines } = parseTemplate(src, full);
    named.set(full, nodes);
    for (const [defName, body] of defines) named.set(defName, body);
  }

  const chartObject = {
    Name: name,
    Version: chart.meta.version,
    AppVersion: chart.meta.appVersion,
    Description: chart.meta.description,
    Type: chart.meta.type,
    KubeVersion: chart.meta.kubeVersion,
    APIVersion: chart.meta.apiVersion,
  };
  const release = {
    Name: opts.releaseName ?? 'dws',
    Namespace: opts.namespace ?? 'default',
    Service: 'Helm',
    IsInstall: true,
    IsUpgrade: false,
    Revision: 1,
  };

  const manifests = new Map<string, string>();
  const objects: RenderedObject[] = [];
  for (const file of chart.templates.keys()) {
    const base = path.posix.basename(file);
    // Partials hold defines only; NOTES.txt is printed by helm, not applied.
    if (base.startsWith('_') || base === 'NOTES.txt') continue;
    const full = `${basePath}/${file}`;
    const data = { Values: values, Chart: chartObject, Release: release, Template: { Name: full, BasePath: basePath } };
    const ctx: ExecContext = { templates: named, file: full, depth: 0 };
    const text = executeNamed(ctx, full, data);
    manifests.set(full, text);
    for (const doc of splitManifest(text, full)) objects.push({ template: full, object: doc });
  }
  return { values, manifests, objects };
}

/** The objects of one template's output, as helm splits and reads them. */
export function splitManifest(text: string, where: string): Dict[] {
  const out: Dict[] = [];
  const docs = parseAllDocuments(text, { version: '1.1', merge: true, uniqueKeys: true });
  const list = Array.isArray(docs) ? docs : [docs];
  list.forEach((doc, i) => {
    if (doc.errors.length) throw new Error(`${where}: document ${i + 1}: ${doc.errors.map((e) => e.message).join('; ')}`);
    const value = doc.toJS() as unknown;
    if (value === null || value === undefined) return;
    if (!isDict(value)) throw new Error(`${where}: document ${i + 1} is not a map`);
    out.push(value);
  });
  return out;
}

/** Renders and names the object: "Kind/name (template)". */
export function describe(o: RenderedObject): string {
  const meta = isDict(o.object.metadata) ? o.object.metadata : {};
  return `${String(o.object.kind)}/${String(meta.name)}`;
}

export function isTemplateError(e: unknown): e is TemplateError {
  return e instanceof TemplateError;
}
