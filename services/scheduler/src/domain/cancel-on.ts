import { celMatches } from '@dws/cel';

/** A run's input as CEL reads it (`event.data`); null when it is not JSON. */
export function parseInput(input: string): unknown {
  try {
    return JSON.parse(input);
  } catch {
    return null;
  }
}

/** The incoming event of a cancelOn, as its `if` reads it (`async`). */
export interface CancellingEvent {
  name: string;
  data: unknown;
  id: string;
  ts: string | undefined;
}

/**
 * Whether a cancelOn entry's `if` selects a run: `event` is the run's own
 * triggering event (its input as data), `async` the cancelling one; no
 * `if` selects every run.
 */
export function cancelOnHolds(expr: string | undefined, run: { eventName: string | null; input: string }, async: CancellingEvent): boolean {
  return !expr || celMatches(expr, { event: { name: run.eventName ?? '', data: parseInput(run.input) }, async });
}

/** The run's error and the audit's detail of a cancel by an event's cancelOn. */
export function cancelOnReason(e: { name: string; id: string }): { message: string; detail: { cancelOn: { event: string; eventId: string } } } {
  return {
    message: `Cancelled by event ${e.name} (${e.id}): it matched the workflow's cancelOn.`,
    detail: { cancelOn: { event: e.name, eventId: e.id } },
  };
}
