import type { Bus } from '@dws/bus';
import type { Database } from '@dws/db';
import type { ApiHandler, Caller, Outbox } from '@dws/runtime';
import { invalid, keyFingerprint, notFound } from '@dws/protocol';
import { parseRegistration } from '../domain/registration.js';
import { LIVENESS_TTL_MS, listRunners, listWorkflows, setWorkflowPaused, type WorkflowRow } from '../store/runners.js';
import { declareAndApply, registerRunner } from './register.js';
import type { RunnerDirectory } from './runner-directory.js';

const iso = (d: Date | string) => (d instanceof Date ? d : new Date(d)).toISOString();
const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

export function invokerApi(deps: { db: Database; bus: Bus; outbox: Outbox; directory: RunnerDirectory }): Record<string, ApiHandler> {
  const { db, bus, outbox, directory } = deps;
  return {
    /** POST /register: store the runner and its workflows, then tell ingest and the scheduler. */
    async register({ caller, body }) {
      const reg = parseRegistration(body, { transport: 'serve' });
      await registerRunner({ db, bus, outbox }, caller.workspaceId, reg, 'serve');
      directory.forget(caller.workspaceId, reg.app);
      return { status: 200, body: { ok: true, runner: reg.runnerId, app: reg.app, workflows: reg.workflows.map((w) => w.name) } };
    },

    /** GET /runners?app= */
    async 'runners.list'({ caller, query }) {
      const rows = await listRunners(db, caller.workspaceId, str(query.app));
      const key = await directory.signingKey(caller.workspaceId);
      const expected = key ? keyFingerprint(key) : undefined;
      const now = Date.now();
      return {
        body: rows.map((r) => {
          const fresh = now - new Date(r.last_seen).getTime() < LIVENESS_TTL_MS;
          return {
            id: r.id,
            app: r.app,
            // A connect runner has no inbound address.
            url: r.url === '' ? undefined : r.url,
            transport: r.transport,
            runtime: r.runtime ?? undefined,
            language: r.language ?? undefined,
            version: r.version ?? undefined,
            workflows: r.workflows,
            lastSeen: iso(r.last_seen),
            registeredAt: iso(r.registered_at),
            // SPEC: live within 90 s of the last heartbeat; a connect runner also needs its socket.
            live: fresh && (r.transport !== 'connect' || r.replica !== null),
            connected: r.transport === 'connect' ? r.replica !== null : undefined,
            keyMatch: r.key_fingerprint !== null && r.key_fingerprint === expected,
          };
        }),
      };
    },

    /** GET /workflows?app= */
    async 'workflows.list'({ caller, query }) {
      const rows = await listWorkflows(db, caller.workspaceId, str(query.app));
      return { body: rows.map(workflowRecord) };
    },

    /**
     * POST /workflows/pause { app, workflow, hold? }: its events and cron ticks start no run until resumed; runs under
     * way go on. With `hold` its events' runs start once it is resumed (ingest keeps them); without, they start none.
     */
    'workflows.pause': ({ caller, body }) => setPaused(caller, body, { by: caller.actor || 'a user', hold: holdOf(body) }),
    /** POST /workflows/resume { app, workflow }: its events start runs again, and the events it held start theirs. */
    'workflows.resume': ({ caller, body }) => setPaused(caller, body, undefined),
  };

  async function setPaused(caller: Caller, body: unknown, pause: { by: string; hold: boolean } | undefined) {
    const { app, workflow } = workflowRef(body);
    // Asked first, so a name that is no workflow of the app declares nothing (no app row, no fact).
    if ((await listWorkflows(db, caller.workspaceId, app, workflow)).length === 0) throw notFound('workflow');
    await declareAndApply({ db, bus, outbox }, caller.workspaceId, app, { runnerId: '', url: '', what: pause ? 'pause' : 'resume' }, (tx) =>
      setWorkflowPaused(tx, caller.workspaceId, app, workflow, pause),
    );
    const [row] = await listWorkflows(db, caller.workspaceId, app, workflow);
    if (!row) throw notFound('workflow'); // no runner declares it any more
    return { body: workflowRecord(row) };
  }
}

/** A workflow as GET /workflows lists it. */
function workflowRecord(r: WorkflowRow) {
  const cfg = r.config;
  const triggers = Array.isArray(cfg.triggers) ? (cfg.triggers as Record<string, unknown>[]) : [];
  const schedules = triggers.filter((t) => typeof t.cron === 'string').map((t) => t.cron as string);
  return {
    name: r.name,
    app: r.app,
    triggers: triggers.length ? triggers : [{ event: r.name }],
    retry: cfg.retry ?? { maxAttempts: 1 },
    onFailure: cfg.onFailure === true,
    concurrency: cfg.concurrency ?? undefined,
    singleton: cfg.singleton ?? undefined,
    scheduled: schedules.length > 0,
    schedules,
    steps: Array.isArray(cfg.steps) ? cfg.steps : undefined,
    paused: r.paused_at === null ? undefined : { at: iso(r.paused_at), by: r.paused_by ?? '', ...(r.hold ? { hold: true } : {}) },
    updatedAt: iso(r.updated_at),
  };
}

/** The body of a pause or resume: which workflow, of which app. */
/** A pause's `hold`: a boolean when given. */
function holdOf(body: unknown): boolean {
  const hold = (body as Record<string, unknown> | null)?.hold;
  if (hold !== undefined && typeof hold !== 'boolean') throw invalid('invalid_body', 'hold must be true or false.');
  return hold === true;
}

function workflowRef(body: unknown): { app: string; workflow: string } {
  const b = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>;
  const app = str(b.app);
  const workflow = str(b.workflow);
  if (!app || !workflow) throw invalid('invalid_body', 'app and workflow are required: the workflow to pause or resume, and its app.');
  return { app, workflow };
}
