import { fromBinary, StartRunSchema } from '@dws/proto';
import { subjects, type Caller, type PendingPublish } from '@dws/runtime';
import { contextOf, linkTo, nowMs, SpanKind, startRunRoot, type Tracer } from '@dws/telemetry';
import type { TriggeredEntry } from '../domain/admission.js';

/** The run ids whose StartRun a committed transaction wrote. */
export function startedRuns(pending: PendingPublish): Set<string> {
  const out = new Set<string>();
  for (const m of pending.messages) if (m.subject === subjects.startRun && m.msgId) out.add(m.msgId);
  return out;
}

/** One event of an ingest call, as its spans describe it. */
export interface TracedEvent {
  id: string | undefined;
  name: string;
  source: string;
  triggered: TriggeredEntry[];
}

/**
 * The `event.ingest` spans of one call (docs/tracing.md), made once its
 * transaction committed, from its start time: one per run it started, as
 * the root of that run's trace (the run's own ids: every pass hangs under
 * it), and one in the caller's trace when the request carried a
 * `traceparent` (linked to the runs' roots, whose spans link back to it).
 * An event that started no run and came without a trace gets a trace of
 * its own.
 */
export function traceIngest(t: Tracer, startMs: number, caller: Caller, events: TracedEvent[], started: ReadonlySet<string>): void {
  const parent = contextOf(caller.traceparent);
  const links = linkTo(parent);
  const endMs = nowMs();
  for (const ev of events) {
    const attributes = {
      'dws.workspace.id': caller.workspaceId,
      'dws.event.id': ev.id ?? '',
      'dws.event.name': ev.name,
      'dws.event.source': ev.source,
    };
    const roots = [];
    for (const e of ev.triggered) {
      if (!e.runId || !started.has(e.runId)) continue;
      const root = startRunRoot(t, 'event.ingest', e.runId, {
        kind: SpanKind.PRODUCER,
        startTime: startMs,
        links,
        attributes: { ...attributes, 'dws.run.id': e.runId, 'dws.app': e.app, 'dws.workflow': e.workflow, 'dws.trigger': 'event' },
      });
      root.end(endMs);
      roots.push(root.spanContext());
    }
    if (parent || roots.length === 0) {
      const span = t.startSpan(
        'event.ingest',
        {
          kind: SpanKind.SERVER,
          startTime: startMs,
          links: roots.map((context) => ({ context })),
          // Not recorded: a repeat of a dedupe id, or an emit delivered again.
          attributes: { ...attributes, 'dws.runs.started': roots.length, 'dws.event.deduped': ev.id === undefined },
        },
        parent,
      );
      span.end(endMs);
    }
  }
}

/**
 * The root span of each run ingest's timers started (a cron tick, a
 * debounce's quiet period over, a batch's timeout): `run.schedule`, from
 * the start of the timer's transaction to its commit.
 */
export function traceScheduled(t: Tracer, startMs: number, pending: PendingPublish): void {
  const endMs = nowMs();
  for (const m of pending.messages) {
    if (m.subject !== subjects.startRun) continue;
    const s = fromBinary(StartRunSchema, m.payload);
    const trigger = s.triggerKind === 'cron' ? 'cron' : s.batch ? 'batch' : 'debounce';
    const root = startRunRoot(t, 'run.schedule', s.runId, {
      kind: SpanKind.PRODUCER,
      startTime: startMs,
      attributes: {
        'dws.workspace.id': s.workspaceId,
        'dws.run.id': s.runId,
        'dws.app': s.app,
        'dws.workflow': s.workflow,
        'dws.trigger': trigger,
        ...(s.eventId ? { 'dws.event.id': s.eventId, 'dws.event.name': s.eventName } : {}),
      },
    });
    root.end(endMs);
  }
}
