import { parseCron, type CronSpec } from '@dws/cel';
import { invalid, parseTags } from '@dws/protocol';

/** SPEC Limits: names and ids are capped at 256 characters. */
const MAX_LEN = 256;
const FIELDS = new Set(['app', 'workflow', 'cron', 'timezone', 'data', 'externalId', 'tags']);

export interface ScheduleInput {
  app: string;
  workflow: string;
  /** The pattern as given (a `TZ=` prefix kept); `spec` holds it parsed, with its zone. */
  cron: string;
  spec: CronSpec;
  /** Raw JSON text of `data` ('null' when omitted). */
  dataJson: string;
  externalId?: string;
  /** The tags of the runs it starts. */
  tags?: string[];
}

function name(o: Record<string, unknown>, field: string, required: boolean): string | undefined {
  const v = o[field];
  if (v === undefined || v === null || v === '') {
    if (required) throw invalid('invalid_schedule', `${field} is required.`);
    return undefined;
  }
  if (typeof v !== 'string' || v.trim() === '') throw invalid('invalid_schedule', `${field} must be a non-blank string.`);
  if (v.length > MAX_LEN) throw invalid('invalid_schedule', `${field} is over ${MAX_LEN} characters.`);
  return v;
}

/** The body of POST /schedules: `{ app, workflow, cron, timezone?, data?, externalId?, tags? }`; any other field is refused. */
export function parseScheduleInput(body: unknown): ScheduleInput {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalid('invalid_schedule', 'A schedule must be a JSON object.');
  const o = body as Record<string, unknown>;
  const unknown = Object.keys(o).filter((k) => !FIELDS.has(k));
  if (unknown.length > 0) throw invalid('invalid_schedule', `Unknown field ${unknown.map((k) => `"${k}"`).join(', ')}; a schedule takes ${[...FIELDS].join(', ')}.`);
  const app = name(o, 'app', true)!;
  const workflow = name(o, 'workflow', true)!;
  const cron = name(o, 'cron', true)!;
  if (o.timezone !== undefined && typeof o.timezone !== 'string') throw invalid('invalid_schedule', 'timezone must be an IANA zone name, e.g. "Europe/Paris".');
  const parsed = parseCron({ cron, timezone: o.timezone });
  if (!parsed.ok) throw invalid('invalid_schedule', `${parsed.error.replace(/\.$/, '')}.`);
  const externalId = name(o, 'externalId', false);
  const tags = parseTags(o.tags, 'invalid_schedule');
  return {
    app, workflow, cron: cron.trim(), spec: parsed.spec, dataJson: JSON.stringify(o.data ?? null), ...(externalId ? { externalId } : {}), ...(tags ? { tags } : {}),
  };
}
