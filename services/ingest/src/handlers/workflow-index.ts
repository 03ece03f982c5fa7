import type { Bus, Subscription } from '@dws/bus';
import { parseWorkflowPolicy, type WorkflowPolicy } from '@dws/cel';
import type { Database } from '@dws/db';
import type { Logger } from '@dws/log';
import { fromBinary, WorkflowsRegisteredSchema, WorkspaceUpsertedSchema } from '@dws/proto';
import { streams, subjects } from '@dws/runtime';
import { cancelsOf, triggersOf, type CancelTrigger, type Trigger } from '../domain/matching.js';
import { indexVersionOf, isSuspended, saveRegistration, saveWorkspace, workflowsOfWorkspace } from '../store/workflows.js';
import { FreshRead } from './fresh-read.js';

const dec = new TextDecoder();

/** What admission reads for every event of a workspace. */
export interface WorkspaceIndex {
  triggers: Trigger[];
  /** cancelOn entries of every workflow (most workspaces have none). */
  cancels: CancelTrigger[];
  /** Parsed policy per `app\0workflow`. */
  policies: Map<string, WorkflowPolicy>;
  /** From `gateway.fact.workspace` (cron and emits have no gateway caller to say so). */
  suspended: boolean;
}

/** A workspace's index and the version it is at least as new as; `fresh` when that version was read for this call. */
export interface IndexView {
  version: number;
  ix: WorkspaceIndex;
  fresh: boolean;
}

export const policyId = (app: string, workflow: string) => `${app}\u0000${workflow}`;

/**
 * The workflows projection, held per workspace in memory (matching and
 * admission run on every event). Never trusted for a time: `of()` reads the
 * workspace's committed index version (one primary-key read, shared by the
 * calls that arrive together) and reloads when it moved; `cached()` skips
 * the read for a caller that checks the version in the statement that acts
 * on the index (ingest's plain path) and comes back to `of()` when it moved.
 * A registration is answered only after its version committed here, so the
 * next event on any replica sees it (docs/architecture.md, "Registration is
 * read-your-writes").
 */
export class WorkflowIndex {
  private readonly cache = new Map<string, { version: number; ix: Promise<WorkspaceIndex> }>();
  private readonly warned = new Set<string>();
  private readonly versions: FreshRead<number>;

  constructor(
    private readonly db: Database,
    private readonly log: Logger,
  ) {
    this.versions = new FreshRead((ws) => indexVersionOf(db, ws));
  }

  async of(workspaceId: string): Promise<IndexView> {
    const version = await this.versions.read(workspaceId);
    const hit = this.cache.get(workspaceId);
    if (hit && hit.version >= version) return { version: hit.version, ix: await hit.ix, fresh: true };
    // Rows read after the version are at least as new as it.
    const ix = this.load(workspaceId);
    this.cache.set(workspaceId, { version, ix });
    ix.catch(() => {
      if (this.cache.get(workspaceId)?.ix === ix) this.cache.delete(workspaceId);
    });
    return { version, ix: await ix, fresh: true };
  }

  /** The index as held, unchecked: its `version` must be checked where it is acted on. */
  async cached(workspaceId: string): Promise<IndexView> {
    const hit = this.cache.get(workspaceId);
    if (!hit) return this.of(workspaceId);
    return { version: hit.version, ix: await hit.ix, fresh: false };
  }

  private async load(workspaceId: string): Promise<WorkspaceIndex> {
    const [rows, suspended] = await Promise.all([workflowsOfWorkspace(this.db, workspaceId), isSuspended(this.db, workspaceId)]);
    const triggers: Trigger[] = [];
    const cancels: CancelTrigger[] = [];
    const policies = new Map<string, WorkflowPolicy>();
    for (const r of rows) {
      const config = typeof r.config === 'object' && r.config !== null && !Array.isArray(r.config) ? r.config : {};
      const { policy, problems } = parseWorkflowPolicy(config);
      // Registration rejects these now; a row stored before that is enforced without the parts that do not parse.
      const id = `${workspaceId}\u0000${r.app}\u0000${r.name}\u0000${problems.join()}`;
      if (problems.length > 0 && !this.warned.has(id)) {
        this.warned.add(id);
        this.log.warn({ workspaceId, app: r.app, workflow: r.name, problems }, 'workflow policy partly ignored');
      }
      triggers.push(...triggersOf(r.app, r.name, policy));
      cancels.push(...cancelsOf(r.app, r.name, policy));
      policies.set(policyId(r.app, r.name), policy);
    }
    return { triggers, cancels, policies, suspended };
  }

  /**
   * WorkflowsRegistered into the projection (and its cron schedules): as the
   * invoker's request before it answers a registration, and from the stream
   * (the durable path, for a registration whose request failed). `onStored`:
   * the registration changed what is stored, its cron schedules perhaps.
   */
  async follow(bus: Bus, onStored: () => void = () => undefined): Promise<Subscription[]> {
    const apply = async (data: Uint8Array) => {
      const fact = fromBinary(WorkflowsRegisteredSchema, data);
      const defs = fact.workflows.map((w) => ({ name: w.name, configJson: dec.decode(w.config) }));
      const stored = await saveRegistration(this.db, fact.workspaceId, fact.app, defs, Number(fact.version));
      if (stored) onStored();
      return stored;
    };
    const stream = await bus.consume(
      { stream: streams.invokerFacts.name, durable: 'ingest-triggers', filterSubject: subjects.workflowsRegistered },
      async (msg) => void (await apply(msg.data)),
    );
    const requests = bus.respond(subjects.applyWorkflowsIngest, 'ingest', async (data) => {
      await apply(data);
      return new Uint8Array();
    });
    return [stream, requests];
  }

  /** Consume WorkspaceUpserted facts: suspension. */
  followWorkspaces(bus: Bus): Promise<Subscription> {
    return bus.consume(
      { stream: streams.gatewayFacts.name, durable: 'ingest-workspaces', filterSubject: subjects.workspaceUpserted },
      async (msg) => {
        const fact = fromBinary(WorkspaceUpsertedSchema, msg.data);
        await saveWorkspace(this.db, fact.workspaceId, fact.suspended);
      },
    );
  }
}
