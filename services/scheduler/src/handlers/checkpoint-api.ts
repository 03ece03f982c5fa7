import type { Bus } from '@dws/bus';
import { conflict, invalid, isServiceError } from '@dws/protocol';
import { callApi, type ApiHandler } from '@dws/runtime';
import { parseCheckpointToken } from '../domain/checkpoint-token.js';
import type { Engine } from '../engine/engine.js';

/** The API service name of one replica: checkpoints of the passes it drives are relayed to it. */
export const replicaService = (owner: string): string => `scheduler.${owner}`;

const notCurrent = () =>
  conflict('pass_not_current', 'This pass no longer drives the run (it ended, was paused or cancelled, or another replica took it over): end the pass and reply.');

/**
 * `runs.checkpoint`: steps a runner finished mid-pass (POST /v1/runs/{id}/checkpoint,
 * or a Connect `checkpoint` frame through the invoker). Any replica may
 * receive it; the one driving the pass stores it, so the others relay it
 * there. 200 once the steps are durable; 409 when the pass is no longer
 * current (the runner ends its pass, and its reply is judged as usual).
 */
export function checkpointApi(o: { bus: Bus; engine: Engine; owner: string }): Record<string, ApiHandler> {
  return {
    'runs.checkpoint': async (call) => {
      const body = (call.body ?? {}) as { token?: unknown; opcodes?: unknown; logs?: unknown };
      const token = parseCheckpointToken(body.token);
      if (!token) throw invalid('invalid_checkpoint', 'body.token: not a checkpoint token from this service (ctx.checkpoint of the invoke).');
      const runId = call.params.id ?? '';
      if (token.replica !== o.owner) {
        try {
          const r = await callApi(o.bus, replicaService(token.replica), 'runs.checkpoint', call.caller, { params: { id: runId }, rawBody: JSON.stringify(body) }, 10_000);
          return { status: r.status, body: r.bodyJson === undefined ? undefined : (JSON.parse(r.bodyJson) as unknown) };
        } catch (err) {
          // That replica is gone (or silent): its passes are over.
          if (isServiceError(err)) throw err;
          throw notCurrent();
        }
      }
      if (!(await o.engine.checkpoint(call.caller.workspaceId, runId, token.pass, body))) throw notCurrent();
      return { status: 200, body: { stored: true } };
    },
  };
}
