import { randomUUID } from 'node:crypto';
import type { Bus } from '@dws/bus';
import { isServiceError, type ConnectCheckpoint, type ConnectCheckpointResult } from '@dws/protocol';
import { callApi } from '@dws/runtime';

/**
 * A Connect runner's checkpoint, handed to the scheduler exactly as the
 * gateway hands over POST /v1/runs/{id}/checkpoint (the socket already
 * proved the workspace). A refusal travels back as its code; bus trouble is
 * thrown (the hub answers "not stored", and the runner ends its pass).
 */
export async function forwardCheckpoint(bus: Bus, workspaceId: string, actor: string, cp: ConnectCheckpoint): Promise<ConnectCheckpointResult> {
  try {
    await callApi(
      bus,
      'scheduler',
      'runs.checkpoint',
      { workspaceId, actor, keyKind: 'secret', requestId: `cp_${randomUUID()}` },
      { params: { id: cp.runId }, rawBody: JSON.stringify({ token: cp.token, opcodes: cp.opcodes, logs: cp.logs ?? [] }) },
      10_000,
    );
    return { stored: true };
  } catch (err) {
    if (isServiceError(err)) return { stored: false, code: err.code, message: err.message };
    throw err;
  }
}
