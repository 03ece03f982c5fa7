import type { Database } from '@dws/db';
import { nextCronTick } from '@dws/cel';
import { notFound, ServiceError } from '@dws/protocol';
import { ids, type ApiHandler } from '@dws/runtime';
import { parseScheduleInput } from '../domain/schedule-input.js';
import { iso, listLimit, str } from './read-values.js';
import { deleteSchedule, listSchedules, pauseSchedule, resumeSchedule, scheduleById, upsertSchedule, type ScheduleRow } from '../store/schedules.js';
import { policyOf } from '../store/workflows.js';

/** A schedule as the API shows it. */
function scheduleRecord(r: ScheduleRow) {
  return {
    id: r.id,
    app: r.app,
    workflow: r.workflow,
    cron: r.cron,
    timezone: r.tz,
    data: JSON.parse(r.data) as unknown,
    externalId: r.external_id ?? undefined,
    tags: r.tags ?? [],
    ...(r.paused_at !== null ? { paused: { at: iso(r.paused_at), by: r.paused_by ?? '' } } : {}),
    // Absent while paused, and once the pattern never fires again.
    nextRunAt: r.next_at === null ? undefined : iso(r.next_at),
    lastRunAt: r.last_at === null ? undefined : iso(r.last_at),
    createdBy: r.created_by,
    createdAt: iso(r.created_at),
    updatedAt: iso(r.updated_at),
  };
}

/**
 * Schedules made through the API (Trigger.dev's imperative schedules,
 * Temporal's and Hatchet's schedule APIs): a cron pattern that starts runs
 * of a registered workflow, each with the schedule's `data`. The timers fire
 * them (handlers/timers.ts); `onArmed` wakes them for a new one.
 */
export function schedulesApi(deps: { db: Database; onArmed: () => void }): Record<string, ApiHandler> {
  const { db } = deps;
  return {
    /** POST /schedules: 201 with the new schedule; 200 when its externalId named one of the workflow's, which it replaces. */
    async 'schedules.create'({ caller, body }) {
      const s = parseScheduleInput(body);
      if (!(await policyOf(db, caller.workspaceId, s.app, s.workflow))) {
        throw new ServiceError(404, 'workflow_not_found', `No workflow "${s.workflow}" is registered in app "${s.app}".`);
      }
      const { row, created } = await upsertSchedule(db, {
        id: ids.generic('sch'), workspace_id: caller.workspaceId, app: s.app, workflow: s.workflow, cron: s.cron, pattern: s.spec.pattern,
        tz: s.spec.tz, data: s.dataJson, external_id: s.externalId ?? null, tags: s.tags ?? null, created_by: caller.actor || 'a user', nextAt: nextCronTick(s.spec, new Date()),
      });
      deps.onArmed();
      return { status: created ? 201 : 200, body: scheduleRecord(row) };
    },

    async 'schedules.list'({ caller, query }) {
      const rows = await listSchedules(db, caller.workspaceId, { app: str(query.app), workflow: str(query.workflow), limit: listLimit(query.limit) });
      return { body: rows.map(scheduleRecord) };
    },

    async 'schedules.get'({ caller, params }) {
      const row = await scheduleById(db, caller.workspaceId, params.id ?? '');
      if (!row) throw notFound('schedule');
      return { body: scheduleRecord(row) };
    },

    /** POST /schedules/{id}/pause: its ticks start no run until it is resumed. */
    async 'schedules.pause'({ caller, params }) {
      const row = await pauseSchedule(db, caller.workspaceId, params.id ?? '', caller.actor || 'a user');
      if (!row) throw notFound('schedule');
      return { body: scheduleRecord(row) };
    },

    /** POST /schedules/{id}/resume: it fires again from its next tick after now (the ticks it missed while paused do not fire). */
    async 'schedules.resume'({ caller, params }) {
      const row = await resumeSchedule(db, caller.workspaceId, params.id ?? '', (s) => nextCronTick(s, new Date()));
      if (!row) throw notFound('schedule');
      deps.onArmed();
      return { body: scheduleRecord(row) };
    },

    /** DELETE /schedules/{id}: no tick after this starts a run (runs it started go on). */
    async 'schedules.delete'({ caller, params }) {
      if (!(await deleteSchedule(db, caller.workspaceId, params.id ?? ''))) throw notFound('schedule');
      return { status: 204 };
    },
  };
}
