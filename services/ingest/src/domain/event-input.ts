import { invalid } from '@dws/protocol';

/** SPEC Limits: name, app, runner, targetApp, dedupeId and session are capped at 256 characters. */
const MAX_LEN = 256;
/** Events per POST /events (an array body). */
export const MAX_BATCH = 100;

export interface EventInput {
  name: string;
  app: string | undefined;
  /** Raw JSON text of data ('null' when omitted). */
  dataJson: string;
  data: unknown;
  dedupeId: string | undefined;
  runner: string | undefined;
  targetApp: string | undefined;
  session: string | undefined;
}

function optional(o: Record<string, unknown>, field: string): string | undefined {
  const v = o[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw invalid('invalid_event', `${field} must be a string.`);
  if (v.length > MAX_LEN) throw invalid('invalid_event', `${field} is over ${MAX_LEN} characters.`);
  return v === '' ? undefined : v;
}

/** Validate one event of a POST /events body (SPEC Errors, POST /events row). */
export function parseEvent(raw: unknown): EventInput {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw invalid('invalid_event', 'An event must be a JSON object.');
  const o = raw as Record<string, unknown>;
  if (typeof o.name !== 'string' || o.name.trim() === '') throw invalid('invalid_event', 'name is required and must not be blank.');
  if (o.name.length > MAX_LEN) throw invalid('invalid_event', `name is over ${MAX_LEN} characters.`);
  const data = o.data === undefined ? null : o.data;
  return {
    name: o.name,
    app: optional(o, 'app'),
    dataJson: JSON.stringify(data),
    data,
    dedupeId: optional(o, 'dedupeId'),
    runner: optional(o, 'runner'),
    targetApp: optional(o, 'targetApp'),
    session: optional(o, 'session'),
  };
}

/** A POST /events body: one event, or an array of up to 100. */
export function parseEventBody(body: unknown): { batch: boolean; items: unknown[] } {
  if (body === undefined) throw invalid('invalid_event', 'Body must be an event object or an array of events.');
  if (Array.isArray(body)) {
    if (body.length === 0) throw invalid('invalid_event', 'An event array must not be empty.');
    if (body.length > MAX_BATCH) throw invalid('invalid_event', `At most ${MAX_BATCH} events per request.`);
    return { batch: true, items: body };
  }
  return { batch: false, items: [body] };
}
