import type { Database } from '@dws/db';

/** An item still due right after `work()` is held by another replica: look again after this, not at once. */
const HELD_RECHECK_MS = 250;

/**
 * A replica's due-time work (timeouts, deliveries, due runs): `work()` runs
 * at once on `kick()` (a local write made something due), never twice at a
 * time: a kick while it runs asks for one more run right after, so nothing
 * made due meanwhile waits. Otherwise it runs every `pollMs`; or, given
 * `nextDueInMs` (when the earliest item is due: one cheap statement), the
 * loop sleeps until then instead of asking the database several times a
 * second for nothing, runs `work()` only when something is due, and `pollMs`
 * only bounds how late it notices what another replica armed and left (it
 * crashed). `within(ms)` is the kick of an item armed for later: the loop
 * looks by then, without a statement now.
 */
export class PollLoop {
  private timer: NodeJS.Timeout | undefined;
  /** When the sleeping loop's timer fires (epoch ms); Infinity while it runs or is stopped. */
  private timerAt = Infinity;
  /** Asked by within() while the loop ran: look again by then (epoch ms). */
  private lookBy = Infinity;
  private running = false;
  private again = false;
  /** The run asked for next is known to be due: no look first. */
  private againDue = false;
  private stopped = false;
  private inflight: Promise<void> = Promise.resolve();

  constructor(
    private readonly work: () => Promise<unknown>,
    private readonly opts: {
      /** The longest time between runs. */
      pollMs: number;
      /** Told of a failed run (the next poll retries). */
      onError: (err: unknown) => void;
      /** Milliseconds until the earliest item is due (0 or less: now), undefined when there is none. */
      nextDueInMs?: () => Promise<number | undefined>;
    },
  ) {}

  /** True once stop() was called: a long `work()` checks it between rounds. */
  get stopping(): boolean {
    return this.stopped;
  }

  start(): void {
    this.kick();
  }

  /** Look now; `due`: the caller knows an item is due now, so the work runs without a look first. */
  kick(due = false): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      this.againDue ||= due;
      return;
    }
    this.running = true;
    clearTimeout(this.timer);
    this.timerAt = Infinity;
    this.inflight = this.round(due).then(
      (sleepMs) => this.ended(sleepMs),
      (err: unknown) => {
        this.opts.onError(err);
        this.ended(this.opts.pollMs);
      },
    );
  }

  /** An item is due in `ms`: look by then (sooner than the loop would have). */
  within(ms: number): void {
    if (this.stopped) return;
    const at = Date.now() + Math.max(0, ms);
    if (this.running) {
      this.lookBy = Math.min(this.lookBy, at);
      return;
    }
    if (at < this.timerAt) this.sleep(at - Date.now());
  }

  /** No new run starts; resolves once the one in flight ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.inflight;
  }

  /** Run the work if it is due; the time to sleep after. */
  private async round(due: boolean): Promise<number> {
    const next = this.opts.nextDueInMs;
    if (!next) {
      await this.work();
      return this.opts.pollMs;
    }
    let inMs = due ? 0 : await next();
    if (inMs !== undefined && inMs <= 0) {
      await this.work();
      inMs = await next();
    }
    if (inMs === undefined) return this.opts.pollMs;
    return Math.min(this.opts.pollMs, inMs > 0 ? inMs : HELD_RECHECK_MS);
  }

  private ended(sleepMs: number): void {
    this.running = false;
    const by = this.lookBy;
    this.lookBy = Infinity;
    if (this.stopped) return;
    if (this.again) {
      const due = this.againDue;
      this.again = this.againDue = false;
      this.kick(due);
      return;
    }
    this.sleep(Math.min(sleepMs, by - Date.now()));
  }

  private sleep(ms: number): void {
    clearTimeout(this.timer);
    const wait = Math.max(0, ms);
    this.timerAt = Date.now() + wait;
    this.timer = setTimeout(() => this.kick(), wait);
  }
}

/**
 * Milliseconds from now until `at`, a SQL expression of one timestamp (a
 * query of the earliest due time of a table, say; `params` its $1..$n),
 * undefined when it is null: one statement, what a PollLoop's `nextDueInMs` asks.
 */
export async function msUntil(db: Database, at: string, params?: unknown[]): Promise<number | undefined> {
  const rows = await db.query<{ ms: string | number | null }>(`select (extract(epoch from ((${at}) - now())) * 1000)::bigint as ms`, params);
  const ms = rows[0]?.ms;
  return ms === null || ms === undefined ? undefined : Number(ms);
}
