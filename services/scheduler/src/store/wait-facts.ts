import type { Database } from '@dws/db';
import type { OpenStep, RunWaitFacts } from '../domain/waiting-for.js';
import { ACTIVE_SQL } from './runs.js';

interface Row {
  status: string;
  runner: string;
  created_ms: string | number;
  lease_owner: string | null;
  lease_until_ms: string | number | null;
  no_runner_since_ms: string | number | null;
  transport_failures: number;
  admitted: boolean;
  concurrency_key: string | null;
  concurrency_limit: number;
  slot_holders: number;
  holds_slots: boolean;
  slot_holder_id: string | null;
  concurrency_key_2: string | null;
  concurrency_limit_2: number;
  slot_holders_2: number;
  paused_by: string | null;
  paused_at_ms: string | number | null;
  steps: OpenStep[] | null;
}

const ms = (v: string | number | null): number | null => (v === null ? null : Number(v));
const epochMs = (col: string) => `(extract(epoch from ${col}) * 1000)::bigint`;

/**
 * What `waitingFor` needs about one run, in one statement: the run's lease,
 * no-runner stamp, transport failures and flow-control columns; the holders
 * of its concurrency keys while it waits for a slot (a queued singleton: the
 * active run of its key); the last pause in the
 * control audit while it is paused; and its unfinished steps with their
 * waiter (event name, CEL) or child run. Undefined for another workspace's run.
 */
export async function waitFacts(db: Database, workspaceId: string, runId: string): Promise<{ run: RunWaitFacts; steps: OpenStep[] } | undefined> {
  const rows = await db.query<Row>(
    `select r.status, r.runner, ${epochMs('r.created_at')} as created_ms, r.lease_owner,
            ${epochMs('r.lease_until')} as lease_until_ms, ${epochMs('r.no_runner_since')} as no_runner_since_ms,
            r.transport_failures, r.admitted, r.concurrency_key, r.concurrency_limit,
            holders.n as slot_holders, r.holds_slots, case when r.holds_slots then holders.holder end as slot_holder_id,
            r.concurrency_key_2, r.concurrency_limit_2,
            case when not r.admitted and r.concurrency_limit_2 > 0 then
              (select count(*)::int from scheduler.runs h
                where h.workspace_id = r.workspace_id and h.concurrency_key_2 = r.concurrency_key_2 and h.concurrency_shared_2 = r.concurrency_shared_2
                  and (r.concurrency_shared_2 or (h.app = r.app and h.workflow = r.workflow))
                  and h.concurrency_limit_2 > 0 and h.admitted and h.status in ${ACTIVE_SQL})
            else 0 end as slot_holders_2,
            pa.actor as paused_by, ${epochMs('pa.created_at')} as paused_at_ms,
            (select json_agg(json_build_object(
                      'name', s.name, 'op', s.op, 'idx', s.idx, 'status', s.status, 'attempts', s.attempts,
                      'wakeAtMs', ${epochMs('s.wake_at')}, 'error', s.error, 'childRunId', s.child_run_id, 'childWorkflow', c.workflow,
                      'eventName', w.event_name, 'eventIf', w.if_expr) order by s.idx)
               from scheduler.steps s
               left join scheduler.runs c on c.id = s.child_run_id and c.workspace_id = s.workspace_id
               left join scheduler.waiters w on w.run_id = s.run_id and w.step_id = s.step_id
              where s.run_id = r.id and s.status in ('sleeping', 'waiting', 'child', 'retrying')) as steps
       from scheduler.runs r
       -- While it waits for a slot: the runs holding its key's (with a queued singleton's limit of 1, the one active run).
       cross join lateral (
         select count(*)::int as n, min(h.id) as holder from scheduler.runs h
          where not r.admitted and r.concurrency_limit > 0
            and h.workspace_id = r.workspace_id and h.app = r.app and h.workflow = r.workflow and h.concurrency_key = r.concurrency_key
            and h.concurrency_limit > 0 and h.admitted and h.status in ${ACTIVE_SQL}
       ) holders
       left join lateral (
         select ca.actor, ca.created_at from scheduler.control_actions ca
          where r.status = 'paused' and ca.workspace_id = r.workspace_id and ca.run_id = r.id and ca.action = 'pause'
          order by ca.id desc limit 1
       ) pa on true
      where r.workspace_id = $1 and r.id = $2`,
    [workspaceId, runId],
  );
  const r = rows[0];
  if (!r) return undefined;
  return {
    run: {
      status: r.status,
      runner: r.runner,
      createdAtMs: Number(r.created_ms),
      leaseOwner: r.lease_owner,
      leaseUntilMs: ms(r.lease_until_ms),
      noRunnerSinceMs: ms(r.no_runner_since_ms),
      transportFailures: r.transport_failures,
      admitted: r.admitted,
      concurrencyKey: r.concurrency_key,
      concurrencyLimit: r.concurrency_limit,
      slotHolders: r.slot_holders,
      holdsSlots: r.holds_slots,
      slotHolderId: r.slot_holder_id,
      concurrencyKey2: r.concurrency_key_2,
      concurrencyLimit2: r.concurrency_limit_2,
      slotHolders2: r.slot_holders_2,
      pausedBy: r.paused_by,
      pausedAtMs: ms(r.paused_at_ms),
    },
    steps: (r.steps ?? []).map((s) => ({ ...s, wakeAtMs: ms(s.wakeAtMs) })),
  };
}
