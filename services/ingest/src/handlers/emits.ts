import type { Bus, Subscription } from '@dws/bus';
import { EmitEventSchema, fromBinary } from '@dws/proto';
import { COMMAND_ACK_WAIT_MS, streams, subjects } from '@dws/runtime';
import { runTraceparent, tracer } from '@dws/telemetry';
import type { Ingestor } from './ingestor.js';

const dec = new TextDecoder();

/**
 * step.emit: events a workflow emits, recorded with source `emit` under the
 * id the scheduler drew for the step, so a redelivered command records and
 * fans out nothing the second time. A dedupeId dedupes per app: the app of
 * the run that emitted it. One with a delay is stored until then
 * (ScheduledEvents), under the same id.
 */
export function consumeEmits(bus: Bus, ingestor: Ingestor): Promise<Subscription> {
  return bus.consume({ stream: streams.ingestCmds.name, durable: 'ingest-emits', filterSubject: subjects.emitEvent, concurrency: 16, ackWaitMs: COMMAND_ACK_WAIT_MS }, async (msg) => {
    const e = fromBinary(EmitEventSchema, msg.data);
    const dataJson = e.data.length ? dec.decode(e.data) : 'null';
    // Tracing on: the emitted event's spans continue the emitting run's trace (its root span).
    const trace = tracer() && e.sourceRunId ? { traceparent: runTraceparent(e.sourceRunId) } : {};
    await ingestor.ingest({ workspaceId: e.workspaceId, actor: `run:${e.sourceRunId}`, keyKind: 'internal', requestId: '', ...trace }, [
      {
        source: 'emit',
        id: e.eventId,
        ev: {
          name: e.name,
          // SPEC Emit: dedupeId is per app, the emitting run's; the event is recorded under that app too.
          app: e.app || undefined,
          // SPEC Emit: targetApp narrows to one app's triggers; omitted, it broadcasts workspace-wide (whatever app emitted it).
          scope: e.targetApp || undefined,
          targetApp: e.targetApp || undefined,
          dataJson,
          data: JSON.parse(dataJson) as unknown,
          dedupeId: e.dedupeId || undefined,
          runner: undefined,
          session: e.session || undefined,
          ...(e.tags.length > 0 ? { tags: e.tags } : {}),
          // step.emit's delay: stored until then (a redelivery once it has passed is taken in at once, under its id: nothing twice).
          ...(Number(e.dueAtMs) > Date.now() ? { dueAtMs: Number(e.dueAtMs) } : {}),
        },
      },
    ]);
  });
}
