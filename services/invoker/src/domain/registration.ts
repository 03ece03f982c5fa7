import { parseWorkflowPolicy } from '@dws/cel';
import { aiSpendProblem, retryProblem } from '@dws/protocol';
import { checkProtocolVersion, invalid } from '@dws/protocol';

const MAX_NAME = 256;

export interface WorkflowRegistration {
  name: string;
  /** The registered object as sent, kept whole: ingest and the scheduler read the parts they own. */
  config: Record<string, unknown>;
}

export interface Registration {
  app: string;
  /** Runner id, or the url when the runner gave none (SPEC: keyed by url). */
  runnerId: string;
  url: string;
  runtime: string | null;
  language: string | null;
  version: string | null;
  keyFingerprint: string | null;
  workflows: WorkflowRegistration[];
}

function optionalString(body: Record<string, unknown>, field: string): string | null {
  const v = body[field];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string' || v.length > MAX_NAME) throw invalid('invalid_registration', `${field} must be a string of at most ${MAX_NAME} characters.`);
  return v;
}

function requiredName(v: unknown, field: string): string {
  if (typeof v !== 'string' || v.trim() === '') throw invalid('invalid_registration', `${field} is required.`);
  if (v.length > MAX_NAME) throw invalid('invalid_registration', `${field} is over ${MAX_NAME} characters.`);
  return v;
}

/** CEL filters and keys, cron expressions and flow-control shapes, checked by the parser ingest enforces them with (issue #5). */
function checkPolicy(config: Record<string, unknown>, i: number): void {
  const { problems } = parseWorkflowPolicy(config);
  if (problems.length > 0) throw invalid('invalid_registration', `workflows[${i}]: ${problems.join(' ')}`);
}

/**
 * Validate a POST /register body, or the payload of a Connect
 * `runner.register` frame (no url; runner required). SPEC Runner protocol.
 * Throws a 400 ServiceError naming the field.
 */
export function parseRegistration(body: unknown, opts: { transport: 'serve' | 'connect' }): Registration {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw invalid('invalid_registration', 'Body must be a JSON object.');
  }
  const b = body as Record<string, unknown>;
  const version = checkProtocolVersion(b.protocolVersion);
  if (!version.ok) throw invalid('protocol_version_mismatch', version.message);
  const app = requiredName(b.app, 'app');
  let url = '';
  if (opts.transport === 'serve') {
    url = requiredName(b.url, 'url');
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw invalid('invalid_registration', 'url must be an absolute http(s) URL.');
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
      throw invalid('invalid_registration', 'url must be an absolute http(s) URL.');
    }
  }
  const runner = optionalString(b, 'runner');
  // A connect runner has no url to be keyed by: its id is the handshake's key (SPEC Transports).
  if (opts.transport === 'connect' && (runner === null || runner.trim() === '')) {
    throw invalid('invalid_registration', 'runner is required on a Connect registration.');
  }
  if (!Array.isArray(b.workflows)) throw invalid('invalid_registration', 'workflows must be an array.');
  const seen = new Set<string>();
  const workflows = b.workflows.map((w, i) => {
    if (typeof w !== 'object' || w === null || Array.isArray(w)) {
      throw invalid('invalid_registration', `workflows[${i}] must be an object.`);
    }
    const config = w as Record<string, unknown>;
    const name = requiredName(config.name, `workflows[${i}].name`);
    if (seen.has(name)) throw invalid('invalid_registration', `workflow ${name} is registered twice.`);
    seen.add(name);
    if (config.triggers !== undefined && !Array.isArray(config.triggers)) {
      throw invalid('invalid_registration', `workflows[${i}].triggers must be an array.`);
    }
    for (const [j, t] of ((config.triggers as unknown[] | undefined) ?? []).entries()) {
      const trig = t as Record<string, unknown> | null;
      const ok =
        typeof trig === 'object' &&
        trig !== null &&
        ((typeof trig.event === 'string' && trig.event.trim() !== '' && trig.event.length <= MAX_NAME) ||
          (typeof trig.cron === 'string' && trig.cron.trim() !== ''));
      if (!ok) throw invalid('invalid_registration', `workflows[${i}].triggers[${j}] needs an event name or a cron expression.`);
      if (trig.if !== undefined && typeof trig.if !== 'string') {
        throw invalid('invalid_registration', `workflows[${i}].triggers[${j}].if must be a CEL string.`);
      }
    }
    const retry = retryProblem(config.retry);
    if (retry) throw invalid('invalid_registration', `workflows[${i}].${retry}`);
    checkPolicy(config, i);
    const spend = aiSpendProblem(config.aiSpend);
    if (spend) throw invalid('invalid_registration', `workflows[${i}].${spend}`);
    return { name, config };
  });
  return {
    app,
    runnerId: runner ?? url,
    url,
    runtime: optionalString(b, 'runtime'),
    language: optionalString(b, 'language'),
    version: optionalString(b, 'version'),
    keyFingerprint: optionalString(b, 'keyFingerprint'),
    workflows,
  };
}
