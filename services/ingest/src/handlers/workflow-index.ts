import type { Bus, Subscription } from '@dws/bus';
import { parseWorkflowPolicy, type WorkflowPolicy } from '@dws/cel';
import type { Database } from '@dws/db';
import type { Logger } from '@dws/log';
import { fromBinary, WorkflowsRegisteredSchema, WorkspaceUpsertedSchema } from '@dws/proto';
import { streams, subjects } from '@dws/runtime';
import { triggersOf, type Trigger } from '../domain/matching.js';
import { isSuspended, saveRegistration, saveWorkspace, workflowsOfWorkspace } from '../store/workflows.js';

const dec = new TextDecoder();

/** What admission reads for every event of a workspace. */
export interface WorkspaceIndex {
  triggers: Trigger[];
  /** Parsed policy per `app\0workflow`. */
  policies: Map<string, WorkflowPolicy>;
  /** From `gateway.fact.workspace` (cron and emits have no gateway caller to say so). */
  suspended: boolean;
}

export const policyId = (app: string, workflow: string) => `${app}\u0000${workflow}`;

/**
 * The workflows projection, held per workspace in memory (matching and
 * admission run on every event) and reloaded when a registration changes
 * it. Other replicas see changes within `ttlMs`.
 */
export class WorkflowIndex {
  private readonly cache = new Map<string, { at: number; ix: Promise<WorkspaceIndex> }>();
  private readonly warned = new Set<string>();

  constructor(
    private readonly db: Database,
    private readonly log: Logger,
    private readonly ttlMs = 2000,
  ) {}

  of(workspaceId: string): Promise<WorkspaceIndex> {
    const hit = this.cache.get(workspaceId);
    if (hit && Date.now() - hit.at < this.ttlMs) return hit.ix;
    const ix = this.load(workspaceId);
    this.cache.set(workspaceId, { at: Date.now(), ix });
    ix.catch(() => this.cache.delete(workspaceId));
    return ix;
  }

  private async load(workspaceId: string): Promise<WorkspaceIndex> {
    const [rows, suspended] = await Promise.all([workflowsOfWorkspace(this.db, workspaceId), isSuspended(this.db, workspaceId)]);
    const triggers: Trigger[] = [];
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
      policies.set(policyId(r.app, r.name), policy);
    }
    return { triggers, policies, suspended };
  }

  /** Consume WorkflowsRegistered facts into the projection (and its cron schedules). */
  follow(bus: Bus): Promise<Subscription> {
    return bus.consume(
      { stream: streams.invokerFacts.name, durable: 'ingest-triggers', filterSubject: subjects.workflowsRegistered },
      async (msg) => {
        const fact = fromBinary(WorkflowsRegisteredSchema, msg.data);
        await saveRegistration(this.db, fact.workspaceId, fact.app, fact.workflows.map((w) => ({ name: w.name, configJson: dec.decode(w.config) })));
        this.cache.delete(fact.workspaceId);
      },
    );
  }

  /** Consume WorkspaceUpserted facts: suspension. */
  followWorkspaces(bus: Bus): Promise<Subscription> {
    return bus.consume(
      { stream: streams.gatewayFacts.name, durable: 'ingest-workspaces', filterSubject: subjects.workspaceUpserted },
      async (msg) => {
        const fact = fromBinary(WorkspaceUpsertedSchema, msg.data);
        await saveWorkspace(this.db, fact.workspaceId, fact.suspended);
        this.cache.delete(fact.workspaceId);
      },
    );
  }
}
