import type { Bus } from '@dws/bus';
import type { Database } from '@dws/db';
import { create, toBinary, WorkflowsRegisteredSchema } from '@dws/proto';
import { unavailable } from '@dws/protocol';
import { subjects, type Outbox } from '@dws/runtime';
import type { Registration } from '../domain/registration.js';
import { declareAppWorkflows, saveRegistration, type SocketHold, type Transport } from '../store/runners.js';

const enc = new TextEncoder();

/** How long a registration waits for each projection to confirm it. */
const APPLY_TIMEOUT_MS = 10_000;

/**
 * Stores a runner and its workflows and, in the same transaction, settles
 * the app's declared workflow set and its version; a changed set is queued
 * as the WorkflowsRegistered fact (ingest: triggers, cron, flow control;
 * scheduler: retry, onFailure). Shared by POST /register and the Connect
 * handshake.
 *
 * Read-your-writes: the registration is answered only once both
 * projections have committed this version (a core request to each, the same
 * bytes as the fact). An event sent after the answer therefore matches what
 * was registered on every ingest replica: each one checks its cached index
 * against the stored version per event. If a projection cannot confirm,
 * the call fails (503) and the runner registers again; the queued fact
 * still reaches it.
 */
export async function registerRunner(
  deps: { db: Database; bus: Bus; outbox: Outbox },
  workspaceId: string,
  reg: Registration,
  transport: Transport,
  hold?: SocketHold,
): Promise<void> {
  await declareAndApply(deps, workspaceId, reg.app, { runnerId: reg.runnerId, url: reg.url, what: 'registration' }, (tx) =>
    saveRegistration(tx, workspaceId, reg, transport, hold),
  );
}

/**
 * In one transaction, `change` (a registration, a pause) and the app's
 * declared workflows settled after it, the WorkflowsRegistered fact queued
 * when the set changed; once committed, answered only when both
 * projections have applied it (see registerRunner).
 */
export async function declareAndApply(
  deps: { db: Database; bus: Bus; outbox: Outbox },
  workspaceId: string,
  app: string,
  origin: { runnerId: string; url: string; what: string },
  change: (tx: Database) => Promise<void>,
): Promise<void> {
  const { pending, payload } = await deps.db.tx(async (tx) => {
    await change(tx);
    const declared = await declareAppWorkflows(tx, workspaceId, app);
    const fact = create(WorkflowsRegisteredSchema, {
      workspaceId,
      app,
      runnerId: origin.runnerId,
      url: origin.url,
      registeredAtMs: BigInt(Date.now()),
      version: BigInt(declared.version),
      workflows: declared.workflows.map((w) => ({ name: w.name, config: enc.encode(w.configJson) })),
    });
    const bytes = toBinary(WorkflowsRegisteredSchema, fact);
    const facts = declared.changed ? [{ subject: subjects.workflowsRegistered, msgId: `wf-${workspaceId}-${app}-${declared.version}`, payload: bytes }] : [];
    return { pending: await deps.outbox.enqueue(tx, facts), payload: bytes };
  });
  await deps.outbox.afterCommit(pending);
  // Sent even when nothing changed: an earlier call may have failed to confirm.
  try {
    await Promise.all([
      deps.bus.request(subjects.applyWorkflowsIngest, payload, { timeoutMs: APPLY_TIMEOUT_MS }),
      deps.bus.request(subjects.applyWorkflowsScheduler, payload, { timeoutMs: APPLY_TIMEOUT_MS }),
    ]);
  } catch (err) {
    throw unavailable(
      'registration_not_applied',
      `The ${origin.what} is stored, but event matching could not confirm it (${(err as Error).message}); send it again.`,
    );
  }
}
