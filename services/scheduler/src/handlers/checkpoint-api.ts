import type { Express } from 'express';
import type { Bus } from '@dws/bus';
import { jsonBody } from '@dws/http';
import { conflict, invalid, isServiceError, ServiceError, type ErrorBody } from '@dws/protocol';
import { callApi, type ApiHandler, type Caller } from '@dws/runtime';
import { parseCheckpointToken, type CheckpointTokens } from '../domain/checkpoint-token.js';
import type { CheckpointPath, Engine } from '../engine/engine.js';

/** The API service name of one replica: checkpoints of the passes it drives are relayed to it. */
export const replicaService = (owner: string): string => `scheduler.${owner}`;

const notCurrent = () =>
  conflict('pass_not_current', 'This pass no longer drives the run (it ended, was paused or cancelled, or another replica took it over): end the pass and reply.');
const badToken = () => invalid('invalid_checkpoint', 'body.token: not a checkpoint token from this service (ctx.checkpoint of the invoke).');

/** The caller of a relayed direct checkpoint: the MAC vouches for it, no key does. */
const RELAY_CALLER: Caller = { workspaceId: '', actor: 'scheduler', keyKind: 'internal', requestId: '' };

export type CheckpointBody = { token?: unknown; opcodes?: unknown; logs?: unknown };

/**
 * Checkpoints: steps a runner finished mid-pass. They reach the replica
 * driving the pass two ways:
 * - `runs.checkpoint` on the bus (POST /v1/runs/{id}/checkpoint through the
 *   gateway, or a Connect `checkpoint` frame through the invoker): any replica
 *   may receive it and relays it to the one the token names; the caller's
 *   workspace must be the run's.
 * - POST /checkpoints/{id} on this replica's own port (`ctx.checkpointUrl`,
 *   offered when SERVICE_SCHEDULER_URL says where runners reach it), or a
 *   message on the WebSocket at /checkpoints there (`ctx.checkpointSocket`,
 *   handlers/checkpoint-socket.ts): no gateway and no bus on the step's path;
 *   the token's MAC is the credential.
 *   A direct checkpoint that reached another replica (replicas behind one
 *   address: `docker compose --scale`, a load-balanced Service) is relayed
 *   to the one the token names on the bus (`runs.checkpointRelayed` on its
 *   own service), where the MAC is checked: one hop more, not a pass ended.
 * Either answers 200 once the steps are durable, 409 when the pass is no
 * longer current (the runner ends its pass, and its reply is judged as usual).
 */
export function checkpointApi(o: { bus: Bus; engine: Engine; tokens: CheckpointTokens }) {
  /** Store on this replica; `workspaceId` undefined when the MAC alone vouches for the caller. */
  const store = async (path: CheckpointPath, workspaceId: string | undefined, runId: string, body: CheckpointBody, pass: number) => {
    if (!(await o.engine.checkpoint(path, workspaceId, runId, pass, body))) throw notCurrent();
    return { status: 200, body: { stored: true } };
  };

  /** Send a checkpoint on to the replica its token names; that replica gone (or silent), its passes are over. */
  const relay = async (replica: string, op: string, caller: Caller, runId: string, body: CheckpointBody) => {
    try {
      const r = await callApi(o.bus, replicaService(replica), op, caller, { params: { id: runId }, rawBody: JSON.stringify(body) }, 10_000);
      return { status: r.status, body: r.bodyJson === undefined ? undefined : (JSON.parse(r.bodyJson) as unknown) };
    } catch (err) {
      if (isServiceError(err)) throw err;
      throw notCurrent();
    }
  };

  const bus: Record<string, ApiHandler> = {
    'runs.checkpoint': async (call) => {
      const body = (call.body ?? {}) as CheckpointBody;
      const token = parseCheckpointToken(body.token);
      if (!token) throw badToken();
      const runId = call.params.id ?? '';
      if (token.replica !== o.tokens.replica) return relay(token.replica, 'runs.checkpoint', call.caller, runId, body);
      if (!o.tokens.verify(runId, token)) throw badToken();
      return store('bus', call.caller.workspaceId, runId, body, token.pass);
    },
  };

  /** A direct checkpoint (route or socket) of one of this replica's passes: the token's MAC is the credential. */
  const storeDirect = async (runId: string, body: CheckpointBody, path: CheckpointPath): Promise<void> => {
    const token = parseCheckpointToken(body.token);
    if (!token) throw badToken();
    // Not ours (another replica's, or forged): nothing to store here, the pass ends.
    if (!o.tokens.verify(runId, token)) throw token.replica === o.tokens.replica ? badToken() : notCurrent();
    await store(path, undefined, runId, body, token.pass);
  };

  /** Served on this replica's own bus service only: direct checkpoints another replica received. */
  const relayed: Record<string, ApiHandler> = {
    'runs.checkpointRelayed': async (call) => {
      await storeDirect(call.params.id ?? '', (call.body ?? {}) as CheckpointBody, 'relayed');
      return { status: 200, body: { stored: true } };
    },
  };

  /**
   * A checkpoint that reached this replica directly (the route or the socket). Resolves once stored;
   * throws the ServiceError to answer otherwise.
   */
  const direct = async (runId: string, body: CheckpointBody, path: 'socket' | 'direct' = 'direct'): Promise<void> => {
    const token = parseCheckpointToken(body.token);
    if (!token || token.replica === o.tokens.replica) return storeDirect(runId, body, path);
    const r = await relay(token.replica, 'runs.checkpointRelayed', RELAY_CALLER, runId, body);
    if (r.status !== 200) {
      const e = (r.body as ErrorBody | undefined)?.error;
      throw new ServiceError(r.status, e?.code ?? 'checkpoint_failed', e?.message ?? 'The checkpoint was not stored.');
    }
  };

  /** The direct route, on the replica's own HTTP port (`pnpm dev` mounts it on its one port). */
  const routes = (app: Express) => {
    app.post('/checkpoints/:id', ...jsonBody(), (req, res, next) => {
      direct(String(req.params.id ?? ''), (req.body ?? {}) as CheckpointBody).then(() => res.status(200).json({ stored: true }), next);
    });
  };

  return { bus, relayed, routes, direct };
}
