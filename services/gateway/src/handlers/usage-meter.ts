import type { Bus, BusMessage, Subscription } from '@dws/bus';
import type { Database } from '@dws/db';
import type { Logger } from '@dws/log';
import { fromBinary, ModelCeilingReachedSchema, RunFinishedSchema, type ModelCeilingReached, type RunFinished } from '@dws/proto';
import { streams, subjects, type Outbox } from '@dws/runtime';
import { GroupCommit } from '@dws/protocol';
import { monthOf, previousMonth } from '../domain/usage.js';
import { countRunEnds, pruneMeteredRuns, recordModelUsage, usageSuspendedIds } from '../store/usage.js';
import { lockWorkspace } from '../store/workspaces.js';
import { settleWorkspace, type Settled } from './workspace-state.js';

export interface UsageMeterOptions {
  /** How often every replica lifts usage suspensions of past months and prunes old dedupe rows. @default 60000 */
  sweepMs?: number;
  /** The clock months are read from (tests move it across a month end). @default Date.now */
  now?: () => number;
}

export interface UsageMeterDeps {
  db: Database;
  bus: Bus;
  outbox: Outbox;
  sealKey: Buffer;
  log: Logger;
  now: () => number;
  /** A suspension changed: drop cached key records so this replica enforces it at once. */
  onSuspensionChange: () => void;
}

/** The work group of every gateway replica on RunFinished. */
export const USAGE_DURABLE = 'gateway-usage';
/** The work group of every gateway replica on ModelCeilingReached. */
export const MODEL_CEILING_DURABLE = 'gateway-model-ceilings';

/**
 * Meters `runsPerMonth`: counts RunFinished facts (scheduler.fact.run.finished)
 * per workspace and UTC month of the run's end, and suspends a workspace whose
 * count reaches its ceiling, through the same path as an admin PATCH.
 *
 * Exactly once per run: the run id is claimed in `metered_runs` by the
 * statement that counts it. A seq watermark would not do here: a failed
 * delivery is redelivered after a backoff while later messages go on, and
 * every replica joins the work group, so facts are not applied in stream order.
 *
 * Model ceilings (modelTokensPerMonth, modelCostPerMonth) are metered by the
 * scheduler, which has every step's usage: it refuses a model call at one and
 * reports the month's figures (scheduler.fact.model.ceiling); they are kept
 * with the month's count and settled the same way.
 *
 * Month rollover: a sweep on every replica (each `sweepMs`, and at start)
 * re-settles usage-suspended workspaces against the current month, so a
 * ceiling reached last month is lifted within a minute of the month turning,
 * with no metered event needed (a suspended workspace starts no runs).
 */
export class UsageMeter {
  /**
   * Facts that arrive together, or while a count is being written, are counted by one statement:
   * every run end of a workspace updates its one usage row, so one statement per fact would queue
   * on that row's lock (W2 measured ~1.6 ms per statement, most of it waiting).
   */
  private readonly counts = new GroupCommit<{ runId: string; workspaceId: string; month: string }, boolean>(
    async (ends) => {
      const settle = await countRunEnds(this.d.db, ends);
      return ends.map((e) => settle.has(e.workspaceId));
    },
    (e) => e.runId,
  );
  private sub: Subscription | undefined;
  private ceilingSub: Subscription | undefined;
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<unknown> = Promise.resolve();
  private stopped = false;

  constructor(
    private readonly d: UsageMeterDeps,
    private readonly sweepMs = 60_000,
  ) {}

  async start(): Promise<void> {
    await this.d.bus.ensureStream(streams.schedulerFacts);
    this.sub = await this.d.bus.consume(
      {
        stream: streams.schedulerFacts.name,
        durable: USAGE_DURABLE,
        filterSubject: subjects.runFinished,
        // Facts are counted in any order (see above), so many at once: one pull serves several
        // messages, and the ones in hand go in one statement (group commit).
        concurrency: 64,
        // A dead-lettered fact is a run never counted: ride out a database outage of most of an hour first.
        backoffMs: [250, 1000, 5000, 30_000],
        maxDeliver: 100,
      },
      (msg) => this.handle(msg),
    );
    this.ceilingSub = await this.d.bus.consume(
      {
        stream: streams.schedulerFacts.name,
        durable: MODEL_CEILING_DURABLE,
        filterSubject: subjects.modelCeilingReached,
        backoffMs: [250, 1000, 5000, 30_000],
        maxDeliver: 100,
      },
      (msg) => this.handleCeiling(msg),
    );
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.sub?.stop();
    await this.ceilingSub?.stop();
    await this.sweeping;
  }

  /** One RunFinished delivery; a redelivery of the same run counts nothing. */
  async handle(msg: BusMessage): Promise<void> {
    let fact: RunFinished;
    try {
      fact = fromBinary(RunFinishedSchema, msg.data);
    } catch (err) {
      // No redelivery can make it parse.
      this.d.log.warn({ err, seq: msg.seq }, 'unreadable RunFinished; not metered');
      return;
    }
    if (!fact.workspaceId || !fact.runId) {
      this.d.log.warn({ seq: msg.seq }, 'RunFinished without workspace or run id; not metered');
      return;
    }
    const month = monthOf(Number(fact.atMs) || this.d.now());
    const current = monthOf(this.d.now());
    // Most workspaces have no ceiling and no usage suspension: claimed and counted, with the facts beside it.
    const settle = await this.counts.submit({ runId: fact.runId, workspaceId: fact.workspaceId, month });
    // Otherwise settle under the workspace lock (workspace row first, then the usage row: the order
    // PATCH and the sweep lock in), also on a redelivery, so a crash between the two loses no settle.
    if (!settle) return;
    const settled = await this.d.db.tx(async (tx): Promise<Settled | undefined> => {
      const row = await lockWorkspace(tx, fact.workspaceId);
      return row ? settleWorkspace(tx, this.d, row, current) : undefined;
    });
    await this.published(settled);
  }

  /** One ModelCeilingReached: keep the month's reported model usage, then settle the workspace (a repeat changes nothing). */
  async handleCeiling(msg: BusMessage): Promise<void> {
    let fact: ModelCeilingReached;
    try {
      fact = fromBinary(ModelCeilingReachedSchema, msg.data);
    } catch (err) {
      this.d.log.warn({ err, seq: msg.seq }, 'unreadable ModelCeilingReached; ignored');
      return;
    }
    if (!fact.workspaceId || !/^\d{4}-\d{2}$/.test(fact.month)) {
      this.d.log.warn({ seq: msg.seq }, 'ModelCeilingReached without workspace or month; ignored');
      return;
    }
    const current = monthOf(this.d.now());
    const settled = await this.d.db.tx(async (tx): Promise<Settled | undefined> => {
      const row = await lockWorkspace(tx, fact.workspaceId);
      if (!row) return undefined;
      const usage = await recordModelUsage(tx, fact.workspaceId, fact.month, fact.tokens, fact.cost);
      // A report of another month (clocks apart at its turn) is kept under it; the settle reads the current month's usage.
      return settleWorkspace(tx, this.d, row, current, {}, fact.month === current ? usage : undefined);
    });
    await this.published(settled);
  }

  /** Re-settle every usage-suspended workspace against the current month (lifts last month's), then prune. */
  async sweep(): Promise<void> {
    const month = monthOf(this.d.now());
    for (const id of await usageSuspendedIds(this.d.db)) {
      const settled = await this.d.db.tx(async (tx) => {
        const row = await lockWorkspace(tx, id);
        // Re-read under the lock: a PATCH may have changed it since the list was read.
        if (!row?.suspended || row.suspended_reason !== 'usage_limit') return undefined;
        return settleWorkspace(tx, this.d, row, month);
      });
      await this.published(settled);
    }
    await pruneMeteredRuns(this.d.db, previousMonth(month));
  }

  private async published(settled: Settled | undefined): Promise<void> {
    if (!settled?.pending) return;
    await this.d.outbox.afterCommit(settled.pending);
    this.d.log.info({ workspaceId: settled.row.id, suspended: settled.row.suspended, usage: settled.usage }, 'workspace usage suspension changed');
    this.d.onSuspensionChange();
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.sweeping = this.sweep()
        .catch((err: unknown) => this.d.log.warn({ err }, 'usage sweep failed'))
        .finally(() => this.schedule(this.sweepMs));
    }, ms);
  }
}
