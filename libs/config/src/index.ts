import { z } from 'zod';

/** Thrown by loadConfig: names the variable and what was wrong with it. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

const bool = z.enum(['on', 'off']);
const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));

/** Every variable of CONTRACT.md, plus the SERVICE_* knobs the fleet adds. */
const schema = z.object({
  /** Bind address of this process's HTTP server. */
  HOST: z.string().default('127.0.0.1'),
  /** Port of this process's HTTP server (the gateway's API port in `pnpm dev`). */
  PORT: z.coerce.number().int().min(0).max(65535).optional(),
  /** Embedded storage directory (PGlite data + bus log) when DATABASE_URL is unset. */
  SERVICE_DATA_DIR: z.string().default('.data'),
  /** Real Postgres instead of embedded PGlite. */
  DATABASE_URL: optionalString.pipe(z.string().url().optional()),
  /** Real NATS JetStream instead of the in-process bus. */
  NATS_URL: optionalString,
  /** Bearer token of the admin API; unset turns the admin API off. */
  SERVICE_ADMIN_TOKEN: optionalString,
  /** Secret API key of workspace `default`; generated and printed when unset. */
  SERVICE_DEV_SECRET_KEY: optionalString,
  /** Public API key of workspace `default`; generated and printed when unset. */
  SERVICE_DEV_PUBLIC_KEY: optionalString,
  /** Runner signing secret of workspace `default`; generated and printed when unset. */
  SERVICE_SIGNING_KEY: optionalString,
  /** `off` disables authentication (local experiments only). */
  SERVICE_AUTH: bool.default('on'),
  /** Key that seals secrets at rest. Unset: a fixed development key (warned about at start). */
  SERVICE_SEAL_KEY: optionalString,
  /**
   * Earlier seal keys, comma-separated: secrets sealed under them still open (webhook endpoint and
   * receiver secrets carry the id of their key), while new ones are sealed under SERVICE_SEAL_KEY.
   */
  SERVICE_SEAL_KEYS_PREVIOUS: optionalString,
  /**
   * Outbound webhooks to loopback, link-local and private addresses. `off` outside `pnpm dev`
   * (apps/fleet turns it on), so an endpoint URL cannot reach the service's own network.
   */
  SERVICE_WEBHOOK_ALLOW_PRIVATE: bool.default('off'),
  /** Namespace for every stream and subject on NATS, so several fleets can share one server. */
  SERVICE_BUS_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_-]*$/, 'letters, digits, _ or - only')
    .default(''),
  /**
   * Copies NATS JetStream keeps of each of the fleet's streams (num_replicas): 3 on a three-node cluster keeps the
   * bus up and its messages safe when a server is lost; more than 1 needs a cluster. Existing streams are scaled.
   */
  SERVICE_BUS_REPLICAS: z.coerce.number().int().min(1).max(5).default(1),
  /** pino level. */
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** How long a scheduler replica holds a run it drives before another may take it over (ms). */
  SERVICE_RUN_LEASE_MS: z.coerce.number().int().min(1000).default(15000),
  /**
   * How far (percent) a process lets its V8 old heap grow past what its last full collection kept before it
   * collects again; 0 leaves V8's own factor (up to 300%), which trades memory for a little less GC time.
   */
  SERVICE_HEAP_GROWTH_PERCENT: z.coerce.number().int().min(0).max(1000).default(50),
  /**
   * How often (seconds) a process checks whether it is quiet and holds garbage V8 has not collected yet (4 MiB
   * past its last full collection), and collects it then; 0 leaves it to V8, which waits for ~8 MiB whatever
   * the growth factor says.
   */
  SERVICE_QUIET_GC_SECONDS: z.coerce.number().int().min(0).max(86_400).default(30),
  /** Runs one scheduler replica drives at once; more stay queued until a replica has room. */
  SERVICE_MAX_ACTIVE_RUNS: z.coerce.number().int().min(1).default(512),
  /**
   * Where the gateway proxies Connect WebSockets in the fleet (`pnpm dev` hands them over in process): the
   * invoker's own HTTP port, or several replicas' comma-separated (tried in random order, the next on a refusal).
   */
  SERVICE_INVOKER_URL: z
    .string()
    .default('http://127.0.0.1:8291')
    .refine((v) => v.split(',').every((u) => URL.canParse(u.trim())), 'one or more comma-separated http URLs'),
  /**
   * The base URL runners reach this scheduler replica's own port at (e.g. `http://$(POD_IP):8290`). When set, each
   * invoke offers `ctx.checkpointUrl` and the SDK stores a pass's steps straight with the replica driving it, not
   * through the gateway and the bus; a runner that cannot reach it falls back to the gateway.
   */
  SERVICE_SCHEDULER_URL: optionalString.pipe(z.string().url().optional()),
  /** Upper bound on one invoke (runner call), ms. */
  SERVICE_INVOKE_TIMEOUT_MS: z.coerce.number().int().min(100).default(300000),
  /** Infer: the anthropic-kind provider (Messages API) and the openai-kind one (Chat Completions). */
  SERVICE_ANTHROPIC_BASE_URL: z.string().url().default('https://api.anthropic.com'),
  SERVICE_ANTHROPIC_API_KEY: optionalString,
  SERVICE_OPENAI_BASE_URL: z.string().url().default('https://api.openai.com/v1'),
  SERVICE_OPENAI_API_KEY: optionalString,
  /** Upper bound of one model call (each attempt). */
  SERVICE_INFER_TIMEOUT_MS: z.coerce.number().int().min(100).default(120000),
});

export type Config = Readonly<z.infer<typeof schema>>;

/**
 * Parse and validate the environment once, at start. A bad value throws a
 * ConfigError naming the variable; callers print it and exit non-zero.
 */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`invalid environment: ${lines.join('; ')}`);
  }
  if (parsed.data.NATS_URL !== undefined && !/^(nats|tls|ws|wss):\/\//.test(parsed.data.NATS_URL.split(',')[0] ?? '')) {
    throw new ConfigError(`invalid environment: NATS_URL: expected nats://host:port, got "${parsed.data.NATS_URL}"`);
  }
  return Object.freeze(parsed.data);
}
