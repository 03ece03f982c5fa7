import { readFileSync } from 'node:fs';
import { Ajv, type ErrorObject } from 'ajv';
import { parse } from 'yaml';

/**
 * docker-compose.yml as `docker compose config` would see it: variables interpolated
 * the compose way (a `${X:?message}` with X unset is an error, as compose refuses to
 * start), then validated against the compose-spec JSON schema (vendored in
 * schema/compose-spec.json, see apps/deploy-check/README.md), then checked for what
 * the schema cannot know about this project.
 */

type Dict = Record<string, unknown>;
const isDict = (v: unknown): v is Dict => typeof v === 'object' && v !== null && !Array.isArray(v);

export class InterpolationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InterpolationError';
  }
}

const SCHEMA_FILE = new URL('../schema/compose-spec.json', import.meta.url);

/** Compose's interpolation of one string: $X, ${X}, ${X:-d}, ${X-d}, ${X:?e}, ${X?e}, ${X:+r}, ${X+r}, $$. */
export function interpolate(s: string, env: Record<string, string | undefined>, where: string): string {
  return s.replace(
    /\$(\$|[A-Za-z_][A-Za-z0-9_]*|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])((?:[^{}]|\{[^{}]*\})*))?\})/g,
    (all, simple: string, braced?: string, op?: string, arg?: string) => {
      if (simple === '$') return '$';
      if (!all.startsWith('${')) return env[simple] ?? '';
      const name = braced as string;
      const value = env[name];
      const unset = value === undefined;
      const emptyOrUnset = unset || value === '';
      const nested = (t: string) => interpolate(t, env, where);
      switch (op) {
        case undefined:
          return value ?? '';
        case ':-':
          return emptyOrUnset ? nested(arg ?? '') : (value as string);
        case '-':
          return unset ? nested(arg ?? '') : (value as string);
        case ':?':
          if (emptyOrUnset) throw new InterpolationError(`${where}: required variable ${name} is missing a value: ${arg ?? ''}`);
          return value as string;
        case '?':
          if (unset) throw new InterpolationError(`${where}: required variable ${name} is missing a value: ${arg ?? ''}`);
          return value as string;
        case ':+':
          return emptyOrUnset ? '' : nested(arg ?? '');
        case '+':
          return unset ? '' : nested(arg ?? '');
        default:
          throw new InterpolationError(`${where}: unsupported interpolation ${all}`);
      }
    },
  );
}

function interpolateTree(v: unknown, env: Record<string, string | undefined>, at: string): unknown {
  if (typeof v === 'string') return interpolate(v, env, at);
  if (Array.isArray(v)) return v.map((x, i) => interpolateTree(x, env, `${at}/${i}`));
  if (isDict(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, interpolateTree(x, env, `${at}/${k}`)]));
  return v;
}

/** The compose file parsed (merge keys applied) and interpolated; throws InterpolationError. */
export function loadCompose(text: string, env: Record<string, string | undefined>): Dict {
  // Compose reads YAML 1.2 (go-yaml v3), with << merge keys.
  const raw = parse(text, { merge: true, uniqueKeys: true }) as unknown;
  if (!isDict(raw)) throw new Error('docker-compose.yml: not a map');
  return interpolateTree(raw, env, '') as Dict;
}

let compiled: ReturnType<Ajv['compile']> | undefined;

export function validateComposeSchema(doc: Dict): string[] {
  if (!compiled) {
    const schema = JSON.parse(readFileSync(SCHEMA_FILE, 'utf8')) as Dict;
    // The file names draft-07 by an https URL ajv does not register; draft-07 is ajv's default.
    delete schema.$schema;
    // strict: false because the spec's schema uses annotations ajv's strict mode rejects; allErrors for a full report.
    compiled = new Ajv({ strict: false, allErrors: true }).compile(schema);
  }
  if (compiled(doc)) return [];
  return (compiled.errors ?? []).map((e: ErrorObject) => `${e.instancePath || '/'} ${e.message ?? ''} ${JSON.stringify(e.params)}`);
}

export const SERVICES = ['gateway', 'ingest', 'scheduler', 'invoker', 'approvals', 'webhook-dispatcher'];

/** What this project needs of its compose file, beyond the schema. */
export function checkComposeFleet(doc: Dict): string[] {
  const out: string[] = [];
  const services = isDict(doc.services) ? doc.services : {};
  for (const name of ['postgres', 'nats', ...SERVICES]) if (!isDict(services[name])) out.push(`services.${name} is missing`);
  const ports = new Set<string>();
  for (const name of SERVICES) {
    const s = services[name];
    if (!isDict(s)) continue;
    const build = s.build;
    const context = typeof build === 'string' ? build : isDict(build) ? build.context : undefined;
    const dockerfile = isDict(build) ? (build.dockerfile ?? 'Dockerfile') : 'Dockerfile';
    if (context !== '.' || dockerfile !== 'Dockerfile')
      out.push(`services.${name}: must be built from the repository's Dockerfile (build.context ".")`);
    const command = Array.isArray(s.command) ? s.command : [];
    if (command[0] !== `dist/services/${name}/bin.js`)
      out.push(`services.${name}: command must be ["dist/services/${name}/bin.js"] (the image's entrypoint is node)`);
    const env = isDict(s.environment) ? s.environment : {};
    for (const v of ['DATABASE_URL', 'NATS_URL', 'SERVICE_SEAL_KEY', 'PORT'])
      if (!env[v]) out.push(`services.${name}: environment.${v} is not set`);
    if (typeof env.PORT === 'string') {
      if (ports.has(env.PORT)) out.push(`services.${name}: PORT ${env.PORT} is used twice`);
      ports.add(env.PORT);
    }
    const deps = isDict(s.depends_on) ? Object.keys(s.depends_on) : Array.isArray(s.depends_on) ? s.depends_on.map(String) : [];
    for (const d of deps) if (!isDict(services[d])) out.push(`services.${name}: depends_on names unknown service ${d}`);
    if (!deps.includes('postgres') || !deps.includes('nats')) out.push(`services.${name}: must depend on postgres and nats`);
  }
  const nats = services.nats;
  if (isDict(nats) && !(Array.isArray(nats.command) && nats.command.some((a) => a === '-js' || a === '--jetstream')))
    out.push('services.nats: JetStream is not enabled (-js)');
  return out;
}

/**
 * Variables in the raw file that would give a secret a default: `${SERVICE_SEAL_KEY:-x}`
 * or a literal value. Every secret must come from the environment with `:?`.
 */
export function secretDefaults(text: string, secrets: string[]): string[] {
  const out: string[] = [];
  for (const name of secrets) {
    const uses = [...text.matchAll(new RegExp(`\\$\\{${name}((?::?[-?+])[^}]*)?\\}`, 'g'))];
    if (!uses.length) out.push(`${name} is not taken from the environment`);
    for (const u of uses)
      if (!(u[1] ?? '').startsWith(':?'))
        out.push(`${name} is used as \${${name}${u[1] ?? ''}}: it must be \${${name}:?...} so compose refuses to start without it`);
  }
  return out;
}
