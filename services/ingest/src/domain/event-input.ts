import { parseDelay } from '@dws/cel';
import { invalid, parseTags, unknownEventFields } from '@dws/protocol';

/** SPEC Limits: name, app, runner, targetApp, dedupeId and session are capped at 256 characters. */
const MAX_LEN = 256;
/** Events per POST /events (an array body). */
export const MAX_BATCH = 100;

export interface EventInput {
  name: string;
  /**
   * The app the event is recorded and deduped under (SPEC: dedupeId is per
   * app): a POST's `app`, or the app of the run that emitted it.
   */
  app: string | undefined;
  /**
   * The one app whose triggers the event may start; undefined broadcasts
   * workspace-wide. Kept apart from `app` because an emit is deduped under
   * its run's app yet broadcasts unless it names a targetApp (SPEC Emit).
   */
  scope: string | undefined;
  /** Raw JSON text of data ('null' when omitted). */
  dataJson: string;
  data: unknown;
  dedupeId: string | undefined;
  runner: string | undefined;
  targetApp: string | undefined;
  session: string | undefined;
  /** `tags` (at most 10, each 1-128 characters), given to the runs it starts. */
  tags?: string[];
  /**
   * `delay`: when the event is to be taken in (epoch ms), if that is in the
   * future; undefined takes it in now. Until then it is only stored: it wakes
   * nothing and starts nothing, and can be cancelled.
   */
  dueAtMs?: number;
}

function optional(o: Record<string, unknown>, field: string): string | undefined {
  const v = o[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw invalid('invalid_event', `${field} must be a string.`);
  if (v.length > MAX_LEN) throw invalid('invalid_event', `${field} is over ${MAX_LEN} characters.`);
  return v === '' ? undefined : v;
}

/** Validate one event of a POST /events body (SPEC Errors, POST /events row). */
export function parseEvent(raw: unknown, nowMs = Date.now()): EventInput {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw invalid('invalid_event', 'An event must be a JSON object.');
  const o = raw as Record<string, unknown>;
  const unknown = unknownEventFields(Object.keys(o));
  if (unknown) throw invalid('invalid_event', `${unknown}.`);
  if (typeof o.name !== 'string' || o.name.trim() === '') throw invalid('invalid_event', 'name is required and must not be blank.');
  if (o.name.length > MAX_LEN) throw invalid('invalid_event', `name is over ${MAX_LEN} characters.`);
  const data = o.data === undefined ? null : o.data;
  const app = optional(o, 'app');
  const targetApp = optional(o, 'targetApp');
  return {
    name: o.name,
    app,
    // SPEC POST /events: app scopes to one app's triggers, targetApp routes over it.
    scope: targetApp ?? app,
    dataJson: JSON.stringify(data),
    data,
    dedupeId: optional(o, 'dedupeId'),
    runner: optional(o, 'runner'),
    targetApp,
    session: optional(o, 'session'),
    ...tagsOf(o.tags),
    ...dueOf(o.delay, nowMs),
  };
}

function tagsOf(value: unknown): { tags?: string[] } {
  const tags = parseTags(value, 'invalid_event');
  return tags ? { tags } : {};
}

function dueOf(delay: unknown, nowMs: number): { dueAtMs?: number } {
  if (delay === undefined) return {};
  const d = parseDelay(delay, nowMs);
  if (!d.ok) throw invalid('invalid_event', d.error);
  return d.dueAtMs === undefined ? {} : { dueAtMs: d.dueAtMs };
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
