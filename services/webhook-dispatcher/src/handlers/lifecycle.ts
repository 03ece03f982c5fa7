import type { Bus, Subscription } from '@dws/bus';
import type { Database } from '@dws/db';
import { fromBinary, RunFinishedSchema, StepFailedSchema } from '@dws/proto';
import { GroupCommit } from '@dws/protocol';
import { ids, streams, subjects } from '@dws/runtime';
import { MAX_ATTEMPTS } from '../domain/attempts.js';
import { runFinishedPayload, stepFailedPayload } from '../domain/payload.js';
import { subscribersOf, type SubscriberQuery } from '../store/endpoints.js';

/**
 * Queues one delivery per matching enabled endpoint. The dedupe key makes a
 * redelivered fact insert nothing: (endpoint, run, kind) for run.*, and
 * (endpoint, run, step) for step.failed (two steps of one run failing are two events).
 */
async function queue(
  db: Database,
  subscribers: GroupCommit<SubscriberQuery, { id: string; url: string }[]>,
  f: { workspaceId: string; app: string; runId: string; kind: string; key: string },
  body: (id: string) => unknown,
): Promise<number> {
  let queued = 0;
  for (const e of await subscribers.submit(f)) {
    const id = ids.generic('dlv');
    const rows = await db.query(
      `insert into webhook_dispatcher.deliveries (id, workspace_id, app, endpoint_id, url, event_kind, source_run_id, dedupe_key, payload, status, max_attempts, next_attempt_at)
       values ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, 'pending', $10, now())
       on conflict (dedupe_key) do nothing returning id`,
      [id, f.workspaceId, f.app, e.id, e.url, f.kind, f.runId, `${e.id}:${f.key}`, JSON.stringify(body(id)), MAX_ATTEMPTS],
    );
    queued += rows.length;
  }
  return queued;
}

/** scheduler.fact.run.finished and scheduler.fact.step.failed -> lifecycle deliveries. */
export async function consumeLifecycle(bus: Bus, db: Database, onQueued: () => void): Promise<Subscription[]> {
  // Most facts find no endpoint: the lookups of the facts in hand go in one statement, batched as a group
  // commit batches writes (each in a read sent after its fact arrived, so none misses an endpoint made before).
  const subscribers = new GroupCommit((qs: SubscriberQuery[]) => subscribersOf(db, qs));
  const runs = await bus.consume({ stream: streams.schedulerFacts.name, durable: 'dispatcher-run-finished', filterSubject: subjects.runFinished, concurrency: 16 }, async (msg) => {
    const f = fromBinary(RunFinishedSchema, msg.data);
    const kind = `run.${f.status}`;
    const n = await queue(db, subscribers, { workspaceId: f.workspaceId, app: f.app, runId: f.runId, kind, key: `${f.runId}:${kind}` }, (id) => runFinishedPayload(id, f).body);
    if (n > 0) onQueued();
  });
  const steps = await bus.consume({ stream: streams.schedulerFacts.name, durable: 'dispatcher-step-failed', filterSubject: subjects.stepFailed, concurrency: 16 }, async (msg) => {
    const f = fromBinary(StepFailedSchema, msg.data);
    const n = await queue(db, subscribers, { workspaceId: f.workspaceId, app: f.app, runId: f.runId, kind: 'step.failed', key: `${f.runId}:step.failed:${f.stepId}` }, (id) => stepFailedPayload(id, f));
    if (n > 0) onQueued();
  });
  return [runs, steps];
}
