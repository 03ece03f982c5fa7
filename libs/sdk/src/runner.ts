import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { Agent, request } from 'undici';
import { keyFingerprint, PROTOCOL_VERSION, type RegisterBody, type WorkflowRegistration } from '@dws/protocol';
import { openConnection, type ConnectOptions, type Connection } from './connect.js';
import { NonRetriableError } from './errors.js';
import { fromEnv } from './env.js';
import { DEFAULT_STEP_BUDGET_MS, type Checkpoint } from './execution.js';
import { CheckpointSockets } from './checkpoint-socket.js';
import { createInvokeHandler, errorReply, handleInvoke, sendReply, type InvokeHttpHandler, type InvokeHttpReply, type InvokeTarget } from './serve.js';
import { formatIssues, isStandardSchema, type InferSchemaOutput, type StandardSchemaV1 } from './standard-schema.js';
import type { Workflow, WorkflowHandler, WorkflowOptions } from './types.js';

/** How long a checkpoint may take before the pass gives up on it (and ends, replying with the step). */
const CHECKPOINT_TIMEOUT_MS = 10_000;
/** A scheduler replica offering direct checkpoints that does not take a connection this fast is passed over... */
const DIRECT_CONNECT_TIMEOUT_MS = 2_000;
/** ...for this long: its checkpoints go through the gateway meanwhile. */
const UNREACHABLE_FOR_MS = 30_000;
/** A failed heartbeat is tried again after this, doubling up to the heartbeat interval. */
const HEARTBEAT_RETRY_MS = 1_000;

/** Reported as `version` at registration. */
export const SDK_VERSION = '0.1.0';

export interface RunnerOptions {
  /** App this runner serves. @default `SERVICE_APP`, else `'default'` */
  app?: string;
  /** Service base URL including `/v1`, e.g. `http://127.0.0.1:8288/v1`. @default `SERVICE_URL` */
  url?: string;
  /** Secret API key for registration. Required. @default `SERVICE_API_KEY` */
  apiKey?: string;
  /** Secret the service signs invokes with; required by serve(), checked by connect() when set. @default `SERVICE_SIGNING_KEY` */
  signingKey?: string;
  /**
   * Stable runner id, to pin runs to this runner. @default unset: serve()
   * runners are keyed by publicUrl; connect() picks a random id per process
   */
  runnerId?: string;
  /** The URL the service should call: this runner's invoke endpoint. Required by register(). */
  publicUrl?: string;
  /** Environment the defaults are read from. @default `process.env` */
  env?: Record<string, string | undefined>;
  /** Re-registration period of startHeartbeat(). @default 30_000 (SPEC Limits) */
  heartbeatIntervalMs?: number;
  /** Called when a heartbeat registration fails. @default emits a process warning */
  onHeartbeatError?: (err: unknown) => void;
  /** Largest invoke body serve() accepts, in bytes (the memo grows with the run). @default 32 MiB */
  maxBodyBytes?: number;
  /** Timeout of the register request. @default 10_000 */
  registerTimeoutMs?: number;
  /**
   * How long one pass may keep running sequential `step.run`s after the
   * first new one, in ms; 0 runs one new step per pass. Fewer passes mean
   * less replay and fewer round trips; a longer budget means more finished
   * steps re-run if the process dies mid-pass. See the README for the
   * measurements (250 is the recommended value for idempotent steps).
   * A workflow's own `stepBudgetMs` wins.
   * @default `SERVICE_STEP_BUDGET_MS`, else 0
   */
  stepBudgetMs?: number;
  /**
   * Checkpoint every finished step.run with the service before the handler
   * goes past it, and keep the pass running: a long run costs one pass, not
   * one per step, and a crash re-runs only the step in flight. Used when the
   * service offers it on an invoke (`ctx.checkpoint`); over serve() it needs
   * `url`. Off: one pass per step (or per `stepBudgetMs`).
   * @default true, unless `SERVICE_CHECKPOINTS` is `off`
   */
  checkpoints?: boolean;
}

export interface ListenOptions {
  /** @default 3000, or `PORT` from the environment */
  port?: number;
  /** @default '0.0.0.0' */
  host?: string;
  /** Path of the invoke endpoint. @default '/invoke' */
  path?: string;
  /** The URL the service calls. @default `publicUrl`, else `http://<host>:<port><path>` (127.0.0.1 for 0.0.0.0) */
  publicUrl?: string;
}

export interface Listening {
  server: Server;
  port: number;
  /** Stops the heartbeat and the server. */
  close(): Promise<void>;
}

export interface Runner {
  readonly app: string;
  readonly url: string | undefined;
  readonly runnerId: string | undefined;
  readonly publicUrl: string | undefined;
  readonly stepBudgetMs: number;
  /** Defines a workflow whose event data is typed (and validated every pass) by a Standard Schema. */
  workflow<S extends StandardSchemaV1, TResult = unknown>(
    name: string,
    options: WorkflowOptions & { schema: S },
    handler: WorkflowHandler<InferSchemaOutput<S>, TResult>,
  ): Workflow<InferSchemaOutput<S>, TResult>;
  /** Defines a workflow. Names are unique per runner. */
  workflow<TData = unknown, TResult = unknown>(
    name: string,
    options: WorkflowOptions,
    handler: WorkflowHandler<TData, TResult>,
  ): Workflow<TData, TResult>;
  workflow<TData = unknown, TResult = unknown>(name: string, handler: WorkflowHandler<TData, TResult>): Workflow<TData, TResult>;
  /** Every defined workflow, in definition order. */
  workflows(): Workflow[];
  /**
   * The invoke endpoint as an express-compatible `(req, res)` handler.
   * Reads the raw body itself; mount it before any JSON body parser.
   *
   * @throws Error at setup when no signing key is configured (SPEC Authentication 7)
   */
  serve(): InvokeHttpHandler;
  /**
   * Serve transport in one call: an HTTP server with serve() on `path`,
   * registered at once and re-registered every heartbeat.
   */
  listen(options?: ListenOptions): Promise<Listening>;
  /**
   * Connect transport: dial the service's `GET /connect` WebSocket and
   * receive invokes on it; no inbound address needed. Reconnects with
   * backoff and jitter until close().
   */
  connect(options?: ConnectOptions): Connection;
  /** One invoke from raw bytes and headers, for transports other than serve(). */
  handleInvoke(rawBody: string | Uint8Array, headers: IncomingHttpHeaders): Promise<InvokeHttpReply>;
  /** The body register() sends. */
  registerBody(): RegisterBody;
  /**
   * POSTs `{url}/register` once.
   *
   * @returns the service's JSON reply
   * @throws Error when url or publicUrl is missing, or the service answers non-2xx
   */
  register(): Promise<unknown>;
  /** Re-registers every heartbeatIntervalMs until stop(). Idempotent. */
  startHeartbeat(): void;
  /** Stops the heartbeat and closes the checkpoint sockets. */
  stop(): void;
}

// testWorkflow runs a child workflow defined on the same runner; it finds the
// runner from the workflow object through this map.
const owners = new WeakMap<Workflow, Runner>();

/** The runner that defined `wf`, if it was defined by createRunner. */
export function runnerOf(wf: Workflow): Runner | undefined {
  return owners.get(wf);
}

/** Wraps a handler so event data is validated (and transformed) by the schema before every pass. */
function withSchema(name: string, schema: StandardSchemaV1, handler: WorkflowHandler): WorkflowHandler {
  return async (context) => {
    const result = await schema['~standard'].validate(context.event.data);
    if (result.issues) {
      // Invalid input stays invalid: fail the run instead of retrying it.
      throw new NonRetriableError(`workflow "${name}": event data does not match its schema: ${formatIssues(result.issues)}`);
    }
    return handler({ ...context, event: { ...context.event, data: result.value } });
  };
}

/**
 * Creates a runner. Options default from the environment per SPEC "SDK
 * connection defaults" (`SERVICE_URL`, `SERVICE_API_KEY`, `SERVICE_APP`,
 * `SERVICE_SIGNING_KEY`); the environment is read here, once.
 *
 * @throws Error when no API key is configured: it has no default.
 */
export function createRunner(options: RunnerOptions = {}): Runner {
  const env = options.env ?? process.env;
  const apiKey = options.apiKey ?? fromEnv(env, 'SERVICE_API_KEY');
  if (!apiKey) {
    throw new Error('createRunner: an API key is required: pass apiKey or set SERVICE_API_KEY (it has no default).');
  }
  const app = options.app ?? fromEnv(env, 'SERVICE_APP') ?? 'default';
  const url = options.url ?? fromEnv(env, 'SERVICE_URL');
  const signingKey = options.signingKey ?? fromEnv(env, 'SERVICE_SIGNING_KEY');
  const { runnerId } = options;
  let publicUrl = options.publicUrl;
  const heartbeatIntervalMs = options.heartbeatIntervalMs ?? 30_000;
  const maxBodyBytes = options.maxBodyBytes ?? 32 * 1024 * 1024;
  const registerTimeoutMs = options.registerTimeoutMs ?? 10_000;
  const stepBudgetMs = options.stepBudgetMs ?? Number(fromEnv(env, 'SERVICE_STEP_BUDGET_MS') ?? DEFAULT_STEP_BUDGET_MS);
  if (!Number.isFinite(stepBudgetMs) || stepBudgetMs < 0) {
    throw new Error('createRunner: stepBudgetMs (or SERVICE_STEP_BUDGET_MS) must be a non-negative number of ms');
  }
  const checkpoints = options.checkpoints ?? fromEnv(env, 'SERVICE_CHECKPOINTS') !== 'off';
  const onHeartbeatError =
    options.onHeartbeatError ??
    ((err: unknown) => process.emitWarning(`runner heartbeat registration failed: ${(err as Error)?.message ?? String(err)}`));

  const defined = new Map<string, Workflow>();
  let timer: NodeJS.Timeout | undefined;
  let heartbeatOn = false;
  // A connect runner needs an id (it has no url to be keyed by); one per process.
  let connectId: string | undefined;

  function workflow(name: string, optionsOrHandler: WorkflowOptions | WorkflowHandler, maybeHandler?: WorkflowHandler): Workflow {
    const given = typeof optionsOrHandler === 'function' ? optionsOrHandler : maybeHandler;
    const wfOptions: WorkflowOptions = typeof optionsOrHandler === 'function' ? {} : { ...optionsOrHandler };
    if (typeof name !== 'string' || name === '') throw new Error('runner.workflow: the name must be a non-empty string');
    if (name.length > 256) throw new Error(`runner.workflow("${name.slice(0, 40)}..."): the name is over 256 characters`);
    if (typeof given !== 'function') throw new Error(`runner.workflow("${name}"): a handler function is required`);
    if (defined.has(name)) throw new Error(`runner.workflow("${name}"): a workflow with this name is already defined`);
    if (wfOptions.stepBudgetMs !== undefined && (!Number.isFinite(wfOptions.stepBudgetMs) || wfOptions.stepBudgetMs < 0)) {
      throw new Error(`runner.workflow("${name}"): stepBudgetMs must be a non-negative number of ms`);
    }
    if (wfOptions.schema !== undefined && !isStandardSchema(wfOptions.schema)) {
      throw new Error(`runner.workflow("${name}"): schema must implement Standard Schema v1 (zod 3.24+, valibot 1, arktype 2, ...)`);
    }
    const handler = wfOptions.schema ? withSchema(name, wfOptions.schema, given) : given;
    const wf: Workflow = {
      name,
      options: Object.freeze(wfOptions),
      handler,
      toRegistration(): WorkflowRegistration {
        const { onFailure, schema: _schema, stepBudgetMs: _budget, ...rest } = wfOptions;
        const reg: WorkflowRegistration = { ...rest, name };
        if (onFailure) reg.onFailure = true;
        return reg;
      },
    };
    defined.set(name, wf);
    owners.set(wf, runner);
    return wf;
  }

  // Scheduler replicas that did not answer a direct checkpoint, until when their checkpoints go through the gateway.
  const unreachable = new Map<string, number>();
  let directAgent: Agent | undefined;

  const sockets = new CheckpointSockets({ answerTimeoutMs: CHECKPOINT_TIMEOUT_MS, connectTimeoutMs: DIRECT_CONNECT_TIMEOUT_MS });

  /**
   * Checkpoints straight to the scheduler replica driving the pass when the
   * invoke offers it (the token's MAC is the credential): as a frame on
   * that replica's socket (`ctx.checkpointSocket`), else POSTed to
   * `ctx.checkpointUrl`; else, or when neither can be reached, POSTed to
   * {url}/runs/{id}/checkpoint with the API key. Anything but 200 ends the
   * pass. A checkpoint sent twice (its answer lost) is stored once.
   */
  function serveCheckpoint(runId: string, token: string, direct: { url?: string; socket?: string } = {}): Checkpoint {
    const endpoint = new URL(`runs/${encodeURIComponent(runId)}/checkpoint`, url!.endsWith('/') ? url : `${url}/`);
    const directUrl = direct.url;
    const origin = directUrl && URL.canParse(directUrl) ? new URL(directUrl).origin : undefined;
    const socket = origin ? direct.socket : undefined;
    const post = async (to: string | URL, headers: Record<string, string>, body: string, dispatcher?: Agent) => {
      const res = await request(to, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body,
        headersTimeout: CHECKPOINT_TIMEOUT_MS,
        bodyTimeout: CHECKPOINT_TIMEOUT_MS,
        ...(dispatcher ? { dispatcher } : {}),
      });
      await res.body.dump();
      return res.statusCode === 200;
    };
    const reachable = (key: string) => (unreachable.get(key) ?? 0) < Date.now();
    return async (opcodes, logs) => {
      const body = JSON.stringify({ token, opcodes, logs });
      if (socket && reachable(socket)) {
        try {
          return await sockets.send(socket, runId, body);
        } catch {
          unreachable.set(socket, Date.now() + UNREACHABLE_FOR_MS);
        }
      }
      if (origin && reachable(origin)) {
        try {
          directAgent ??= new Agent({ connect: { timeout: DIRECT_CONNECT_TIMEOUT_MS } });
          return await post(directUrl!, {}, body, directAgent);
        } catch {
          unreachable.set(origin, Date.now() + UNREACHABLE_FOR_MS);
        }
      }
      return post(endpoint, { authorization: `Bearer ${apiKey}` }, body);
    };
  }

  const target = (key: string | undefined, checkpoint = checkpoints && url ? serveCheckpoint : undefined): InvokeTarget => ({
    signingKey: key,
    ...(checkpoint ? { checkpoint } : {}),
    passFor: (name: string) => ({ stepBudgetMs: defined.get(name)?.options.stepBudgetMs ?? stepBudgetMs }),
    resolve(name: string, onFailure: boolean) {
      const wf = defined.get(name);
      if (!wf) {
        return { error: { code: 'workflow_not_found', message: `Workflow "${name}" is not served by this runner (app "${app}").` } };
      }
      if (!onFailure) return wf.handler;
      return wf.options.onFailure ?? { error: { code: 'on_failure_not_defined', message: `Workflow "${name}" has no onFailure handler.` } };
    },
  });

  function requireSigningKey(): string {
    if (!signingKey) {
      throw new Error('runner.serve: a signing key is required to verify invokes: pass signingKey or set SERVICE_SIGNING_KEY.');
    }
    return signingKey;
  }

  function requireUrl(what: string): string {
    if (!url) throw new Error(`${what}: the service URL is required: pass url or set SERVICE_URL.`);
    return url;
  }

  /** Everything a registration says, over either transport. */
  function registration(): Omit<RegisterBody, 'url'> {
    const body: Omit<RegisterBody, 'url'> = {
      app,
      runtime: `node ${process.versions.node}`,
      language: 'typescript',
      version: SDK_VERSION,
      protocolVersion: PROTOCOL_VERSION,
      workflows: [...defined.values()].map((wf) => wf.toRegistration()),
    };
    if (runnerId) body.runner = runnerId;
    if (signingKey) body.keyFingerprint = keyFingerprint(signingKey);
    return body;
  }

  function registerBody(): RegisterBody {
    if (!publicUrl) throw new Error('runner.register: publicUrl is required: the URL the service calls to invoke this runner.');
    const { app: a, ...rest } = registration();
    return { app: a, url: publicUrl, ...rest };
  }

  async function register(): Promise<unknown> {
    const base = requireUrl('runner.register');
    const body = registerBody();
    const endpoint = new URL('register', base.endsWith('/') ? base : `${base}/`);
    const res = await request(endpoint, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      headersTimeout: registerTimeoutMs,
      bodyTimeout: registerTimeoutMs,
    });
    const text = await res.body.text();
    if (res.statusCode < 200 || res.statusCode >= 300) {
      throw new Error(`runner.register: ${endpoint.href} answered ${res.statusCode}: ${text.slice(0, 500)}`);
    }
    if (text === '') return undefined;
    try {
      return JSON.parse(text) as unknown;
    } catch {
      return text;
    }
  }

  function startHeartbeat(): void {
    if (heartbeatOn) return;
    heartbeatOn = true;
    beatIn(heartbeatIntervalMs, 0);
  }

  // The next beat once this one is answered, so registrations never pile up behind a slow service.
  // A failed beat is tried again soon (1 s, 2 s, 4 s ... up to the interval), not a whole interval
  // later: beats that fail three intervals running (the service restarting at each) would leave the
  // runner out of routing (liveness TTL 90 s) until the fourth.
  function beatIn(ms: number, failures: number): void {
    timer = setTimeout(() => {
      void register().then(
        () => heartbeatOn && beatIn(heartbeatIntervalMs, 0),
        (err: unknown) => {
          onHeartbeatError(err);
          if (heartbeatOn) beatIn(Math.min(heartbeatIntervalMs, HEARTBEAT_RETRY_MS * 2 ** failures), failures + 1);
        },
      );
    }, ms);
    // The heartbeat alone must not keep the process alive.
    timer.unref();
  }

  function stop(): void {
    heartbeatOn = false;
    if (timer) clearTimeout(timer);
    timer = undefined;
    sockets.close();
  }

  const runner: Runner = {
    app,
    url,
    runnerId,
    get publicUrl() {
      return publicUrl;
    },
    stepBudgetMs,
    workflow: workflow as Runner['workflow'],
    workflows: () => [...defined.values()],
    serve(): InvokeHttpHandler {
      return createInvokeHandler(target(requireSigningKey()), maxBodyBytes);
    },
    async listen(opts: ListenOptions = {}): Promise<Listening> {
      const invoke = createInvokeHandler(target(requireSigningKey()), maxBodyBytes);
      requireUrl('runner.listen');
      const path = opts.path ?? '/invoke';
      const host = opts.host ?? '0.0.0.0';
      const server = createServer((req, res) => {
        const reqPath = (req.url ?? '/').split('?')[0];
        if (reqPath === path) return void invoke(req, res);
        if (reqPath === '/healthz') return void res.end('{"status":"ok"}');
        sendReply(res, errorReply(404, 'route_not_found', `No route for ${req.method} ${reqPath}; the invoke endpoint is POST ${path}.`));
      });
      const port = await new Promise<number>((resolve, reject) => {
        server.once('error', reject);
        server.listen(opts.port ?? Number(fromEnv(env, 'PORT') ?? 3000), host, () => {
          const a = server.address();
          resolve(typeof a === 'object' && a ? a.port : 0);
        });
      });
      publicUrl = opts.publicUrl ?? publicUrl ?? `http://${host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host}:${port}${path}`;
      try {
        await register();
      } catch (err) {
        await new Promise((resolve) => server.close(resolve));
        throw err;
      }
      startHeartbeat();
      return {
        server,
        port,
        async close() {
          stop();
          server.closeAllConnections();
          await new Promise((resolve) => server.close(resolve));
        },
      };
    },
    connect(opts?: ConnectOptions): Connection {
      const base = requireUrl('runner.connect');
      connectId ??= runnerId ?? `${app}-${randomBytes(4).toString('hex')}`;
      const id = connectId;
      return openConnection(
        {
          url: base,
          apiKey,
          invoke: target(signingKey, undefined),
          checkpoints,
          hello: { protocolVersion: PROTOCOL_VERSION, sdk: `@dws/sdk ${SDK_VERSION}`, runtime: `node ${process.versions.node}` },
          register: () => ({ ...registration(), runner: id }),
        },
        opts,
      );
    },
    handleInvoke(rawBody, headers) {
      return handleInvoke(target(requireSigningKey()), rawBody, headers);
    },
    registerBody,
    register,
    startHeartbeat,
    stop,
  };

  return runner;
}
