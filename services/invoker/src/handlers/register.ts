import type { Database } from '@dws/db';
import { create, toBinary, WorkflowsRegisteredSchema } from '@dws/proto';
import { subjects, type Outbox } from '@dws/runtime';
import { createHash } from 'node:crypto';
import type { Registration } from '../domain/registration.js';
import { saveRegistration, type SocketHold, type Transport } from '../store/runners.js';

const enc = new TextEncoder();

/**
 * Stores a runner and its workflows and, in the same transaction, queues the
 * WorkflowsRegistered fact for ingest (triggers) and the scheduler (retry,
 * flow control, cron). Shared by POST /register and the Connect handshake.
 */
export async function registerRunner(
  deps: { db: Database; outbox: Outbox },
  workspaceId: string,
  reg: Registration,
  transport: Transport,
  hold?: SocketHold,
): Promise<void> {
  const fact = create(WorkflowsRegisteredSchema, {
    workspaceId,
    app: reg.app,
    runnerId: reg.runnerId,
    url: reg.url,
    registeredAtMs: BigInt(Date.now()),
    workflows: reg.workflows.map((w) => ({ name: w.name, config: enc.encode(JSON.stringify(w.config)) })),
  });
  const payload = toBinary(WorkflowsRegisteredSchema, fact);
  const digest = createHash('sha256').update(payload).digest('hex').slice(0, 16);
  const pending = await deps.db.tx(async (tx) => {
    await saveRegistration(tx, workspaceId, reg, transport, hold);
    return deps.outbox.enqueue(tx, [{ subject: subjects.workflowsRegistered, msgId: `wf-${workspaceId}-${digest}`, payload }]);
  });
  await deps.outbox.afterCommit(pending);
}
