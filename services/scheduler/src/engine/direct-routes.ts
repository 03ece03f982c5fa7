import type { Bus } from '@dws/bus';
import type { Logger } from '@dws/log';
import { create, fromBinary, RouteReplySchema, RouteRequestSchema, toBinary } from '@dws/proto';
import { unseal } from '@dws/protocol';
import { subjects } from '@dws/runtime';

/** A serve runner this replica may POST a pass to itself, with the key to sign it. */
export interface DirectTarget {
  runnerId: string;
  url: string;
  signingKey: string;
}

type Route = { targets: DirectTarget[] } | undefined;

/** How long a route request that failed (invoker down or slow) keeps passes on the invoker path. */
const FAILED_ROUTE_MS = 250;
const ROUTE_TIMEOUT_MS = 2000;

/**
 * Where a run's passes may go without the invoker's hop. The invoker knows the
 * runners; when all that can take a (workspace, app, workflow, pin) are serve
 * runners it says so (RouteReply), and this replica POSTs the pass itself for
 * the route's short ttl. Connect runners, and anything the invoker would not
 * route directly, stay on the invoker path (`undefined`). A direct call that
 * fails drops the route (`forget`).
 */
export class DirectRoutes {
  private readonly routes = new Map<string, { until: number; route: Promise<Route> }>();
  private warnedSeal = false;

  constructor(
    private readonly bus: Bus,
    private readonly sealKey: Buffer,
    private readonly log: Logger,
  ) {}

  /** `headers`: the asking pass's trace context (tracing on), so the invoker's lookup joins that run's trace. */
  async target(workspaceId: string, app: string, workflow: string, runner: string, headers?: Record<string, string>): Promise<DirectTarget | undefined> {
    const k = key(workspaceId, app, workflow, runner);
    const now = Date.now();
    let hit = this.routes.get(k);
    if (!hit || hit.until <= now) {
      const previous = hit?.route;
      const entry = { until: now + ROUTE_TIMEOUT_MS, route: this.ask(workspaceId, app, workflow, runner, (ms) => (entry.until = Date.now() + ms), previous, headers) };
      this.routes.set(k, entry);
      hit = entry;
    }
    const route = await hit.route;
    if (!route || route.targets.length === 0) return undefined;
    return route.targets[Math.floor(Math.random() * route.targets.length)];
  }

  forget(workspaceId: string, app: string, workflow: string, runner: string): void {
    this.routes.delete(key(workspaceId, app, workflow, runner));
  }

  private async ask(
    workspaceId: string,
    app: string,
    workflow: string,
    runner: string,
    keepFor: (ms: number) => void,
    previous?: Promise<Route>,
    headers?: Record<string, string>,
  ): Promise<Route> {
    try {
      const bytes = await this.bus.request(
        subjects.route,
        toBinary(RouteRequestSchema, create(RouteRequestSchema, { workspaceId, app, workflow, runner })),
        { timeoutMs: ROUTE_TIMEOUT_MS, ...(headers && { headers }) },
      );
      const reply = fromBinary(RouteReplySchema, bytes);
      keepFor(reply.ttlMs);
      if (!reply.direct) return undefined;
      const signingKey = this.openKey(reply.sealedSigningKey);
      if (signingKey === undefined) return undefined;
      return { targets: reply.targets.map((t) => ({ runnerId: t.runnerId, url: t.url, signingKey })) };
    } catch {
      // No invoker answers: nothing can have re-registered meanwhile (the invoker takes registrations),
      // so the last route still holds and serve runners keep working through an invoker outage. Ask again soon.
      keepFor(FAILED_ROUTE_MS);
      return previous;
    }
  }

  private openKey(sealed: string): string | undefined {
    try {
      return unseal(sealed, this.sealKey);
    } catch (err) {
      // Another SERVICE_SEAL_KEY than the invoker's: correct, only slower (every pass crosses the invoker).
      if (!this.warnedSeal) this.log.warn({ err }, 'cannot open the signing key of a direct route (SERVICE_SEAL_KEY differs from the invoker\'s?); passes go through the invoker');
      this.warnedSeal = true;
      return undefined;
    }
  }
}

const key = (workspaceId: string, app: string, workflow: string, runner: string) => `${workspaceId}\u0000${app}\u0000${workflow}\u0000${runner}`;
