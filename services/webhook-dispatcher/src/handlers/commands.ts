import type { Bus, Subscription } from '@dws/bus';
import type { Database } from '@dws/db';
import { fromBinary, SendWebhookSchema } from '@dws/proto';
import { COMMAND_ACK_WAIT_MS, streams, subjects } from '@dws/runtime';
import { MAX_ATTEMPTS } from '../domain/attempts.js';

const dec = new TextDecoder();

/**
 * ctx.webhook.send hand-offs: one delivery per (run, step). The id was drawn
 * when the step was persisted, so a redelivered command inserts nothing.
 */
export function consumeSends(bus: Bus, db: Database, onQueued: () => void): Promise<Subscription> {
  return bus.consume({ stream: streams.dispatcherCmds.name, durable: 'dispatcher-sends', filterSubject: subjects.sendWebhook, concurrency: 16, ackWaitMs: COMMAND_ACK_WAIT_MS }, async (msg) => {
    const s = fromBinary(SendWebhookSchema, msg.data);
    await db.query(
      `insert into webhook_dispatcher.deliveries (id, workspace_id, app, url, event_kind, source_run_id, dedupe_key, payload, status, max_attempts, next_attempt_at)
       values ($1, $2, $3, $4, 'custom', $5, $6, $7::jsonb, 'pending', $8, now())
       on conflict do nothing`,
      [s.deliveryId, s.workspaceId, s.app, s.url, s.sourceRunId || null, `${s.sourceRunId}:${s.stepId}`, s.body.length ? dec.decode(s.body) : 'null', MAX_ATTEMPTS],
    );
    onQueued();
  });
}
