import type { Bus, Subscription } from '@dws/bus';
import { withTxRetry, type Database } from '@dws/db';
import type { Logger } from '@dws/log';
import { GroupCommit, invalid, mergeTags, redact, type StepError } from '@dws/protocol';
import { create, fromBinary, InvokeRequestSchema, InvokeResult_Outcome, InvokeResultSchema, toBinary } from '@dws/proto';
import { counter, histogram, ids, PollLoop, subjects, type Outbox, type OutboxMessage, type PendingPublish, type RunnerHttp } from '@dws/runtime';
import { checkpointSteps, decide, logsOf, withParsedBody, type Decision, type PassOutcome, type RunView, type StepOutcome } from '../domain/reply.js';
import { invokeBody, memoEntry } from '../domain/invoke-body.js';
import { hasInfer, hasStepError } from '../domain/step-errors.js';
import type { AiSpendView, WorkspaceModelView } from '../domain/ai-spend.js';
import { aiSpendOf, workspaceModelOf } from '../store/ai-spend.js';
import { handoffMessage, runEndMessages, stepFailedMessage } from '../domain/handoffs.js';
import { appendFrames, applyCheckpoints, applyPass, applyPasses, claimDueRuns, insertHeldRuns, loadClaimedSteps, nextClaimInMs, releaseLeases, renewLeases, type Applied, type ApplyCheckpoint, type ApplyPass, type NewFrame, type NewRun } from '../store/runs.js';
import { checkpointPath, type CheckpointTokens } from '../domain/checkpoint-token.js';
import { addEffects, finishRun, parkSteps, type RunEffects } from '../store/effects.js';
import { admitToSlots } from '../store/flow.js';
import { heldFromClaim, type HeldRun } from './held-run.js';
import type { WorkflowConfig, WorkflowConfigs } from './workflow-configs.js';
import type { DirectRoutes } from './direct-routes.js';
import { PassTrace } from './pass-trace.js';
import { publishFrames } from './live.js';

const enc = new TextEncoder();
const dec = new TextDecoder();
const NEW_IDS = { run: ids.run, event: ids.event, delivery: () => ids.generic('dlv') };
const LOG_LEVELS = new Set(['debug', 'info', 'warn', 'error']);
const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);
/**
 * How long an invoke may go without a word from the invoker (its answer, or the
 * progress it sends every third of this while the runner works) before the pass is
 * a transport error, retried with backoff: a SIGKILLed invoker costs ~5 s instead of
 * the whole invoke timeout, while a long step on a live invoker keeps all of
 * SERVICE_INVOKE_TIMEOUT_MS. 5 s tolerates two lost beats or a ~3 s event-loop stall
 * on the invoker; a false alarm only repeats the pass (the runner may run its step
 * again, as after any lost reply; the pass guard drops the late reply).
 */
export const INVOKER_SILENCE_MS = 5000;

/**
 * The longest the claim loop sleeps: it wakes when the next run is due and
 * when this replica makes one due, so this bounds only what it learns from
 * no one (a run armed by a path that does not kick).
 */
const CLAIM_POLL_MS = 2000;
/** Runs claimed per statement. */
const CLAIM_BATCH = 100;

/** How long stop() waits for passes in flight: within a 30 s termination grace period, with room for the rest of shutdown. */
export const STOP_DRAIN_MS = 20_000;

const passes = counter('dws_scheduler_passes_total', 'Passes applied, by what the reply decided (continue, park, succeed, fail, retry_later).');
const stepsApplied = counter('dws_scheduler_steps_total', 'Step outcomes applied, by status (succeeded, failed, retrying, sleeping, waiting, child).');
const checkpoints = counter('dws_scheduler_checkpoints_total', 'Runner checkpoints (steps finished mid-pass), by path (socket: a frame on this replica\'s checkpoint socket; direct: POSTed to this replica; relayed: sent to another replica\'s socket or route, which relayed it; bus: through the gateway or the invoker) and outcome (stored, refused).');
const checkpointBatch = histogram('dws_scheduler_checkpoint_batch_size', 'Checkpoints written by one statement (group commit).', [1, 2, 4, 8, 16, 32, 64, 128]);
const passBatch = histogram('dws_scheduler_pass_batch_size', 'Passes applied by one statement (group commit; a pass that needs a transaction goes alone).', [1, 2, 4, 8, 16, 32, 64, 128]);
const invokeSeconds = histogram('dws_scheduler_invoke_seconds', 'How long a pass took as the scheduler waited for it (checkpoints included), by outcome (reply, no_runner, transport_error, invoker_unavailable).');
const invokes = counter('dws_scheduler_invokes_total', 'Runner calls, by path (direct: the scheduler POSTed to a serve runner; invoker) and outcome (reply, no_runner, transport_error, invoker_unavailable).');

/** How a checkpoint reached this replica: its socket, its own HTTP route, another replica's socket or route that relayed it (all vouched for by the token's MAC alone), or the bus. */
export type CheckpointPath = 'socket' | 'direct' | 'relayed' | 'bus';

export interface EngineOptions {
  db: Database;
  bus: Bus;
  log: Logger;
  outbox: Outbox;
  /** This replica's identity on leases. */
  owner: string;
  /** Mints the checkpoint token of each invoke (this replica's MAC key). */
  tokens: CheckpointTokens;
  /** Base URL runners reach this replica's checkpoint route at (SERVICE_SCHEDULER_URL); unset: checkpoints go through the gateway. */
  checkpointBaseUrl?: string;
  /** The checkpoint WebSocket at that base (`ctx.checkpointSocket`), offered with it. */
  checkpointSocket?: string;
  leaseMs: number;
  invokeTimeoutMs: number;
  workflows: WorkflowConfigs;
  /** Runs driven at once by this replica. @default 512 */
  maxConcurrent?: number;
  /** The longest the claim loop sleeps (it wakes when the next run is due, and when this replica makes one due). @default 2000 */
  pollMs?: number;
  /** Serve runners this replica calls itself (no invoker hop); without them every pass goes through the invoker. */
  direct?: { routes: DirectRoutes; http: RunnerHttp };
}

/**
 * Drives runs: one invoke per pass, one statement per applied reply (a
 * transaction only when the pass has side effects: waiters, children,
 * hand-offs, a parent to wake), the next pass at once while the run keeps
 * making progress. Between passes the run stays in memory, held under a
 * lease, so nothing is re-read.
 */
export class Engine {
  private readonly held = new Map<string, HeldRun>();
  private readonly active = new Set<Promise<void>>();
  /** Claims due runs: sleeps until the next one is due, kicked by what this replica makes due. */
  private readonly claims: PollLoop;
  private renewTimer: NodeJS.Timeout | undefined;
  private due: Subscription | undefined;
  private stopping = false;
  /** Checkpoints of all held runs, written together when they queue up. */
  private readonly checkpointWrites: GroupCommit<ApplyCheckpoint, boolean>;
  /** Passes that need no transaction (most of them), likewise. */
  private readonly passWrites: GroupCommit<ApplyPass, Applied>;
  /** New runs this replica starts, likewise. */
  private readonly startWrites: GroupCommit<{ run: NewRun; frames: NewFrame[] }, boolean>;

  constructor(private readonly o: EngineOptions) {
    this.claims = new PollLoop(() => this.claimDue(), {
      pollMs: o.pollMs ?? CLAIM_POLL_MS,
      onError: (err) => o.log.warn({ err }, 'claiming due runs failed'),
      nextDueInMs: () => nextClaimInMs(o.db, [...this.held.keys()]),
    });
    this.checkpointWrites = new GroupCommit(
      async (batch) => {
        checkpointBatch.observe(batch.length);
        const stored = await applyCheckpoints(o.db, o.owner, batch);
        return batch.map((a) => stored.has(a.runId));
      },
      (a) => a.runId,
    );
    this.passWrites = new GroupCommit(
      async (batch) => {
        passBatch.observe(batch.length);
        const applied = await applyPasses(o.db, o.owner, batch);
        return batch.map((a): Applied => applied.get(a.runId) ?? { applied: false });
      },
      (a) => a.runId,
    );
    this.startWrites = new GroupCommit(
      async (batch) => {
        const inserted = await insertHeldRuns(o.db, batch, o.owner, o.leaseMs);
        return batch.map((s) => inserted.has(s.run.id));
      },
      (s) => s.run.id,
    );
  }

  /** Store a new run held by this replica (with the starts that queue meanwhile); false when it existed. Then `adopt` it. */
  insertHeld(run: NewRun, frames: NewFrame[]): Promise<boolean> {
    return this.startWrites.submit({ run, frames });
  }

  get capacity(): number {
    return (this.o.maxConcurrent ?? 512) - this.held.size;
  }

  start(): void {
    // Another replica handed runs back (it is stopping): they are due now, here too.
    this.due = this.o.bus.subscribe(subjects.runsDue, () => this.claims.kick(true));
    this.claims.start();
    this.renewTimer = setInterval(() => {
      renewLeases(this.o.db, this.o.owner, [...this.held.keys()], this.o.leaseMs).catch((err: unknown) =>
        this.o.log.warn({ err }, 'lease renewal failed'),
      );
    }, Math.max(500, Math.floor(this.o.leaseMs / 3)));
  }

  /**
   * Stop claiming, let passes in flight finish and be applied (for up to
   * `drainMs`: a rolling restart must not wait out a long step), then hand
   * every run still held back, so another replica takes it at once instead
   * of after its lease.
   */
  async stop(drainMs = STOP_DRAIN_MS): Promise<void> {
    this.stopping = true;
    await this.due?.stop();
    await this.claims.stop();
    clearInterval(this.renewTimer);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled([...this.active]), new Promise((r) => (timer = setTimeout(r, drainMs)))]);
    clearTimeout(timer);
    try {
      await releaseLeases(this.o.db, this.o.owner);
      this.o.bus.emit(subjects.runsDue, new Uint8Array());
    } catch (err) {
      this.o.log.warn({ err }, 'handing back leases failed; they lapse');
    }
  }

  /**
   * Drive a run this replica just created (it already holds the lease). Its
   * first frames, just stored, go live at once: a client that opened the
   * run's stream before the run existed is waiting for them.
   */
  adopt(run: HeldRun, firstFrames: NewFrame[] = []): void {
    this.publishLive(run, firstFrames);
    if (firstFrames.length > 0) run.firstFramesAgain = firstFrames;
    // Counted at once (capacity), driven on the next turn: the StartRun's ack goes out
    // before the first invoke is built.
    this.held.set(run.id, run);
    setImmediate(() => {
      if (this.stopping) this.held.delete(run.id); // its lease lapses and any replica takes it
      else this.spawn(run);
    });
  }

  /** Claim now: something just became due (a child started, a waiter woke). */
  nudge(): void {
    this.claims.kick(true);
  }

  /** Claim due runs (expired leases, finished sleeps and backoffs, woken waits) up to capacity. */
  private async claimDue(): Promise<void> {
    let claimed: number;
    do {
      if (this.stopping || this.capacity <= 0) return;
      await admitToSlots(this.o.db);
      const runs = await claimDueRuns(this.o.db, this.o.owner, this.o.leaseMs, Math.min(CLAIM_BATCH, this.capacity), [...this.held.keys()]);
      const memos = await loadClaimedSteps(this.o.db, runs.map((c) => c.id));
      for (const c of runs) {
        const { steps, logKeys } = memos.get(c.id)!;
        this.spawn(heldFromClaim(c, steps, logKeys));
      }
      claimed = runs.length;
    } while (claimed === CLAIM_BATCH);
  }

  private spawn(run: HeldRun): void {
    this.held.set(run.id, run);
    const p = this.drive(run)
      .catch((err: unknown) => {
        // Ours, not the runner's (database or bus trouble): the lease lapses and any replica retries.
        this.o.log.error({ err, runId: run.id }, 'driving run failed; it will be retried after its lease');
      })
      .finally(() => {
        this.held.delete(run.id);
        this.active.delete(p);
      });
    this.active.add(p);
  }

  private async drive(run: HeldRun): Promise<void> {
    for (;;) {
      run.invoking = true;
      run.checkpointed = 0;
      run.stepsFromMs = Date.now();
      this.markRunning(run);
      // Tracing off: undefined, and nothing more is done for it.
      const trace = PassTrace.start(run);
      run.trace = trace;
      let reply: PassOutcome;
      const t0 = performance.now();
      try {
        reply = await this.invoke(run, trace);
      } finally {
        run.invoking = false;
      }
      invokeSeconds.observe((performance.now() - t0) / 1000, { outcome: reply.kind });
      trace?.replied(reply.kind);
      // A checkpoint still being stored as the reply came back goes first.
      await run.applying;
      const outcome = withParsedBody(reply);
      // The workflow's config is read only when the pass needs it: a failed step (SPEC Limits: maxAttempts
      // defaults to 1) or a model call to check against AI spend ceilings.
      const infer = hasInfer(outcome);
      const cfg = hasStepError(outcome) || infer ? await this.o.workflows.get(run.workspaceId, run.app, run.workflow) : undefined;
      const aiSpend: AiSpendView | undefined =
        infer && cfg?.aiSpend ? { ceilings: cfg.aiSpend, ...(await aiSpendOf(this.o.db, run, cfg.aiSpend.perWindow?.windowMs ?? 0)) } : undefined;
      const workspaceModel = infer ? await workspaceModelOf(this.o.db, run.workspaceId) : undefined;
      const decision = decide(this.view(run, cfg, aiSpend, workspaceModel), outcome, Date.now(), NEW_IDS);
      const again = await PassTrace.settle(trace, decision, this.apply(run, decision, logsOf(outcome)));
      run.trace = undefined;
      if (!again || this.stopping) return;
    }
  }

  /** What the pure decision reads of a held run. */
  private view(run: HeldRun, cfg: WorkflowConfig | undefined, aiSpend?: AiSpendView, workspaceModel?: WorkspaceModelView): RunView {
    const deadlines: number[] = [];
    let open = false;
    for (const p of run.pending.values()) {
      if (p.wakeAtMs !== undefined) deadlines.push(p.wakeAtMs);
      else open = true;
    }
    return {
      attempt: run.attempt,
      transportFailures: run.transportFailures,
      noRunnerSinceMs: run.noRunnerSinceMs,
      stepAttempts: run.stepAttempts,
      maxAttempts: cfg?.maxAttempts ?? 1,
      ...(cfg ? { retryBackoff: cfg.retryBackoff } : {}),
      workflow: run.workflow,
      runner: run.runner,
      pendingDeadlines: deadlines,
      hasOpenPending: open,
      checkpointed: run.checkpointed,
      stepsFromMs: run.stepsFromMs,
      ...(aiSpend ? { aiSpend } : {}),
      ...(workspaceModel ? { workspaceModel } : {}),
    };
  }

  /**
   * Steps a runner finished while its pass goes on (a checkpoint, answered
   * once they are durable so the runner's handler may go past them). False
   * when this pass no longer drives the run here: not held, ended, paused or
   * cancelled meanwhile, or taken over; the runner then ends its pass.
   * `workspaceId` is the caller's, or undefined when the token's MAC alone
   * vouches for it (`path` socket or direct).
   *
   * @throws ServiceError 400 when the checkpoint holds anything but finished steps
   */
  async checkpoint(
    path: CheckpointPath,
    workspaceId: string | undefined,
    runId: string,
    pass: number,
    body: { opcodes?: unknown; logs?: unknown },
  ): Promise<boolean> {
    const run = this.held.get(runId);
    if (!run || (workspaceId !== undefined && run.workspaceId !== workspaceId) || run.pass !== pass || !run.invoking || this.stopping) {
      checkpoints.inc({ path, outcome: 'refused' });
      return false;
    }
    const steps = checkpointSteps(this.view(run, undefined), body.opcodes, Date.now(), NEW_IDS);
    if (typeof steps === 'string') throw invalid('invalid_checkpoint', steps);
    const logs = Array.isArray(body.logs) ? (body.logs as ReturnType<typeof logsOf>) : [];
    const stored = run.applying.then(() => this.storeCheckpoint(run, pass, steps, logs));
    run.applying = stored.catch(() => undefined);
    const ok = await (run.trace ? run.trace.checkpoint(path, steps.length, stored) : stored);
    checkpoints.inc({ path, outcome: ok ? 'stored' : 'refused' });
    return ok;
  }

  private async storeCheckpoint(run: HeldRun, pass: number, all: StepOutcome[], logs: ReturnType<typeof logsOf>): Promise<boolean> {
    if (!run.invoking || run.pass !== pass) return false;
    // A checkpoint repeated (its answer was lost) stores nothing twice.
    const steps = all.filter((s) => !this.completed(run, s.id));
    const pendingFrames = run.pendingFrames.splice(0);
    const frames: NewFrame[] = [...pendingFrames];
    const logFrames = this.logFrames(run, logs, run.nextSeq + frames.length);
    frames.push(...logFrames);
    let newSteps = 0;
    const placed = steps.map((s) => ({ ...s, idx: run.known.get(s.id) ?? run.stepCount + newSteps++ }));
    for (const s of placed) {
      frames.push({ seq: 0, kind: 'step_status', fields: { name: s.name, status: s.status, attempt: s.attempts, index: s.idx } });
    }
    frames.forEach((f, i) => (f.seq = run.nextSeq + i));
    if (frames.length === 0) return true;
    const undo = () => {
      // Not stored: the pass's reply (or the next pass) still carries these.
      run.pendingFrames.unshift(...pendingFrames);
      for (const f of logFrames) run.logKeys.delete(f.logKey!);
    };
    let ok: boolean;
    try {
      ok = await this.checkpointWrites.submit({
        runId: run.id,
        pass,
        newSteps,
        nextSeq: run.nextSeq + frames.length,
        steps: placed,
        frames,
      });
    } catch (err) {
      undo();
      throw err;
    }
    if (!ok) {
      undo();
      return false;
    }
    run.stepCount += newSteps;
    run.nextSeq += frames.length;
    run.checkpointed += placed.length;
    // The runner begins its next step once this answer reaches it.
    run.stepsFromMs = Date.now();
    for (const s of placed) {
      run.known.set(s.id, s.idx);
      run.stepAttempts.delete(s.id);
      run.memo.set(s.id, memoEntry(s.id, { dataJson: s.dataJson }));
      stepsApplied.inc({ status: s.status });
    }
    this.publishLive(run, frames);
    return true;
  }

  /**
   * A run claimed queued or waiting reads `running` from the start of its
   * pass (GET /runs/{id}, its stream), not only once the pass's first step is
   * stored, which with one step per pass or a long step is the whole step.
   * Written as a checkpoint of no steps (the same guard, group committed),
   * alongside the invoke; checkpoints and the pass's reply apply after it.
   * Refused (a pause asked meanwhile, the lease lost), its frame waits for
   * the pass's own write as before.
   */
  private markRunning(run: HeldRun): void {
    if (run.pendingFrames.length === 0) return;
    const pass = run.pass;
    const frames = run.pendingFrames.splice(0);
    const undo = () => void run.pendingFrames.unshift(...frames);
    run.applying = run.applying
      .then(() => {
        frames.forEach((f, i) => (f.seq = run.nextSeq + i));
        return this.checkpointWrites.submit({ runId: run.id, pass, newSteps: 0, nextSeq: run.nextSeq + frames.length, steps: [], frames });
      })
      .then((ok) => {
        if (!ok) return undo();
        run.nextSeq += frames.length;
        this.publishLive(run, frames);
      }, undo);
  }

  /** The memo holds this step's result (not a pending marker). */
  private completed(run: HeldRun, id: string): boolean {
    const entry = run.memo.get(id);
    return entry !== undefined && !entry.endsWith('{"pending":true}');
  }

  private async invoke(run: HeldRun, trace?: PassTrace): Promise<PassOutcome> {
    const body = invokeBody(
      {
        runId: run.id,
        workflow: run.workflow,
        attempt: run.attempt,
        app: run.app,
        runner: run.runner,
        eventName: run.eventName,
        inputJson: run.inputJson,
        onFailureError: run.onFailure?.error,
        checkpoint: this.o.tokens.mint(run.id, run.pass),
        checkpointUrl: this.o.checkpointBaseUrl && `${this.o.checkpointBaseUrl}${checkpointPath(run.id)}`,
        checkpointSocket: this.o.checkpointSocket,
      },
      run.memo.values(),
    );
    const bytesOut = enc.encode(body);
    const direct = this.o.direct;
    const target = direct && (await direct.routes.target(run.workspaceId, run.app, run.workflow, run.runner, trace?.headers));
    if (direct && target) {
      trace?.via('direct', target.runnerId);
      const out = await direct.http.post(target.url, bytesOut, target.signingKey, run.id, trace?.traceparent);
      invokes.inc({ path: 'direct', outcome: out.kind === 'reply' ? 'reply' : 'transport_error' });
      if (out.kind === 'reply') return { kind: 'reply', status: out.status, body: dec.decode(out.body) };
      direct.routes.forget(run.workspaceId, run.app, run.workflow, run.runner);
      // Never reached the runner: the invoker routes it now (it passes over that runner, tries another).
      if (!out.neverSent) return { kind: 'transport_error', error: out.error };
      this.o.log.info({ runId: run.id, runner: target.runnerId, code: out.code }, 'direct invoke not sent; routing through the invoker');
    }
    const req = create(InvokeRequestSchema, {
      workspaceId: run.workspaceId,
      runId: run.id,
      app: run.app,
      runner: run.runner,
      workflow: run.workflow,
      pass: BigInt(run.pass),
      body: bytesOut,
    });
    trace?.via('invoker');
    let bytes: Uint8Array;
    try {
      bytes = await this.o.bus.request(subjects.invoke, toBinary(InvokeRequestSchema, req), {
        timeoutMs: this.o.invokeTimeoutMs + 5000,
        idleTimeoutMs: INVOKER_SILENCE_MS,
        ...(trace && { headers: trace.headers }),
      });
    } catch (err) {
      invokes.inc({ path: 'invoker', outcome: 'invoker_unavailable' });
      return { kind: 'invoker_unavailable', error: (err as Error).message };
    }
    const res = fromBinary(InvokeResultSchema, bytes);
    invokes.inc({
      path: 'invoker',
      outcome: res.outcome === InvokeResult_Outcome.REPLY ? 'reply' : res.outcome === InvokeResult_Outcome.NO_RUNNER ? 'no_runner' : 'transport_error',
    });
    switch (res.outcome) {
      case InvokeResult_Outcome.REPLY:
        return { kind: 'reply', status: res.status, body: dec.decode(res.body) };
      case InvokeResult_Outcome.NO_RUNNER:
        return { kind: 'no_runner' };
      default:
        return { kind: 'transport_error', error: res.error || 'transport error' };
    }
  }

  /** New log lines of a reply as frames, each stored once per (attempt, scope, index). */
  private logFrames(run: HeldRun, logs: ReturnType<typeof logsOf>, firstSeq: number): NewFrame[] {
    const frames: NewFrame[] = [];
    for (const l of logs) {
      const scope = typeof l.scope === 'string' && l.scope !== '' ? l.scope.slice(0, 256) : '@root';
      const index = typeof l.index === 'number' && Number.isInteger(l.index) ? l.index : undefined;
      if (index === undefined) continue;
      const key = `${run.attempt}:${scope}:${index}`;
      if (run.logKeys.has(key)) continue;
      run.logKeys.add(key);
      const fields = l.fields !== undefined && l.fields !== null && typeof l.fields === 'object' ? redact(l.fields) : undefined;
      frames.push({
        seq: firstSeq + frames.length,
        kind: 'log',
        logKey: key,
        fields: {
          level: typeof l.level === 'string' && LOG_LEVELS.has(l.level) ? l.level : 'info',
          message: typeof l.message === 'string' ? l.message.slice(0, 64 * 1024) : String(l.message ?? ''),
          ...(fields ? { fields } : {}),
          scope,
          attempt: run.attempt,
        },
      });
    }
    return frames;
  }

  /** Persist a decision; true when the run should be invoked again right away. */
  private async apply(run: HeldRun, d: Decision, logs: ReturnType<typeof logsOf>): Promise<boolean> {
    const frames: NewFrame[] = run.pendingFrames.splice(0);
    frames.push(...this.logFrames(run, logs, run.nextSeq + frames.length));
    const steps: (StepOutcome & { idx: number })[] = [];
    let newSteps = 0;
    for (const s of d.steps) {
      // Already stored by this pass's checkpoint (the runner did not hear the answer).
      if (s.op === 'StepRun' && s.status === 'succeeded' && this.completed(run, s.id)) continue;
      let idx = run.known.get(s.id);
      if (idx === undefined) idx = run.stepCount + newSteps++;
      steps.push({ ...s, idx });
      frames.push({
        seq: run.nextSeq + frames.length,
        kind: 'step_status',
        fields: { name: s.name, status: s.status, attempt: s.attempts, index: idx, ...(s.error ? { error: s.error } : {}) },
      });
    }
    // step.tag (an extension of SPEC): the run's tags grow in step order, up to ten; each Tag step's result is the tags after it.
    let tags = run.tags;
    for (const s of steps) {
      if (!s.addTags) continue;
      tags = mergeTags([tags, s.addTags]) ?? null;
      s.dataJson = JSON.stringify(tags ?? []);
    }
    let status = run.status;
    let resultJson: string | null = null;
    let error: StepError | null = null;
    let lease: ApplyPass['lease'];
    let attempt = run.attempt;
    let transportFailures = 0;
    let noRunnerSinceMs: number | null = null;
    switch (d.type) {
      case 'succeed':
        status = 'succeeded';
        resultJson = d.resultJson;
        lease = { kind: 'none' };
        break;
      case 'fail':
        status = 'failed';
        error = d.error;
        lease = { kind: 'none' };
        break;
      case 'continue':
        status = 'running';
        lease = { kind: 'hold', ms: this.o.leaseMs };
        break;
      case 'park':
        status = 'waiting';
        attempt = d.attempt;
        lease = d.untilMs === null ? { kind: 'none' } : { kind: 'at', atMs: d.untilMs };
        break;
      case 'retry_later':
        status = 'waiting';
        attempt = d.attempt;
        transportFailures = d.transportFailures;
        noRunnerSinceMs = d.noRunnerSinceMs;
        lease = { kind: 'delay', ms: Math.round(d.delayMs) };
        break;
    }
    if (status !== run.status) {
      frames.push({ seq: 0, kind: 'run_status', fields: { status, attempt, ...(error ? { error } : {}) } });
    }
    // Gap-free per-run seqs, numbered in the order the frames are written.
    frames.forEach((f, i) => (f.seq = run.nextSeq + i));
    const terminal = TERMINAL.has(status);
    const handoffs: OutboxMessage[] = [];
    // The facts of this pass carry the tags it leaves the run with.
    const ref = { id: run.id, workspaceId: run.workspaceId, app: run.app, workflow: run.workflow, tags };
    for (const s of steps) {
      if (s.handoff) handoffs.push(handoffMessage(ref, s));
      if (s.status === 'failed') handoffs.push(stepFailedMessage(ref, s));
    }
    const spawnOnFailure =
      status === 'failed' && !run.onFailure && (await this.o.workflows.get(run.workspaceId, run.app, run.workflow)).onFailure ? ids.run() : null;
    const parks = steps.some((s) => s.status === 'waiting' || s.status === 'child');
    const hadOpen = [...run.pending.values()].some((p) => p.status === 'waiting' || p.status === 'child');
    // A model call the service makes for the run is work the run does, not a wait: a concurrency key
    // meant to bound a model API bounds these calls too, so the run keeps its slots while one is out.
    const modelCallOut = (id: string, p: { op: string; status: string }) =>
      p.op === 'Infer' && p.status === 'waiting' && !steps.some((s) => s.id === id && s.status !== 'waiting');
    const keepSlot =
      status === 'waiting' && (steps.some((s) => modelCallOut(s.id, s)) || [...run.pending].some(([id, p]) => modelCallOut(id, p)));
    if (terminal) handoffs.push(...runEndMessages(ref, status, resultJson, error, !parks && !hadOpen));
    // One statement covers the common pass, outbox rows included, group-committed with the other
    // runs' passes that end meanwhile; a transaction only when the pass parks on waiters or
    // children, or its end touches a parent, children or a follow-on run.
    const needsTx = parks || (terminal && (run.parentRunId !== null || spawnOnFailure !== null || hadOpen));
    const args: ApplyPass = {
      runId: run.id,
      workspaceId: run.workspaceId,
      pass: run.pass,
      owner: this.o.owner,
      status,
      resultJson,
      error,
      attempt,
      transportFailures,
      noRunnerSinceMs,
      lease,
      newSteps,
      nextSeq: run.nextSeq + frames.length,
      steps,
      frames,
      outbox: handoffs,
      keepSlot,
      ...(tags !== run.tags && tags ? { tags } : {}),
    };
    // Children started or cancelled, an onFailure run: their frames and messages, once committed.
    let others: { effects: RunEffects; pending: PendingPublish } | undefined;
    const result = needsTx
      ? await withTxRetry(this.o.db, async (tx) => {
          const r = await applyPass(tx, args);
          if (!r.applied) return r;
          const effects = await parkSteps(tx, run, steps);
          if (terminal) {
            addEffects(effects, await finishRun(tx, run, { status: status as 'succeeded' | 'failed', resultJson, error }, { parentRunId: run.parentRunId, spawnOnFailure, hadOpen }));
          }
          others = { effects, pending: await this.o.outbox.enqueue(tx, effects.messages) };
          return r;
        })
      : await this.passWrites.submit(args);
    if (others) {
      for (const [r, f] of others.effects.live) publishFrames(this.o.bus, r, f);
      await this.o.outbox.afterCommit(others.pending);
      if (spawnOnFailure) run.trace?.onFailureRun(spawnOnFailure, run.workflow);
    }
    if (!result.applied) {
      this.o.log.info({ runId: run.id, pass: run.pass }, 'pass no longer current; reply dropped');
      return false;
    }
    passes.inc({ decision: d.type });
    for (const st of steps) stepsApplied.inc({ status: st.status });
    // Committed: update memory, tell live tails, then publish the outbox rows (a client
    // watching the run learns of its end without waiting for the stream's ack).
    run.pass += 1;
    run.tags = tags;
    run.stepCount += newSteps;
    run.nextSeq += frames.length;
    run.attempt = attempt;
    run.transportFailures = transportFailures;
    run.noRunnerSinceMs = noRunnerSinceMs;
    run.status = status;
    for (const s of steps) {
      run.known.set(s.id, s.idx);
      if (s.status === 'retrying') {
        run.stepAttempts.set(s.id, s.attempts);
        continue;
      }
      run.stepAttempts.delete(s.id);
      if (s.status === 'succeeded' || s.status === 'failed') {
        run.pending.delete(s.id);
        run.memo.set(s.id, memoEntry(s.id, { dataJson: s.dataJson, error: s.status === 'failed' ? s.error : undefined }));
      } else {
        run.pending.set(s.id, { op: s.op, status: s.status, wakeAtMs: s.wakeAtMs });
        run.memo.set(s.id, memoEntry(s.id, { pending: true }));
      }
    }
    // Due now: a child started, a parent woken by this end, an onFailure run, a park resolved meanwhile.
    if (steps.some((s) => s.status === 'child') || (terminal && run.parentRunId !== null) || spawnOnFailure || result.dueNow) this.nudge();
    // Released until a time (a sleep, a backoff): the claim loop looks by then.
    else if (lease.kind === 'at') this.claims.within(lease.atMs - Date.now());
    else if (lease.kind === 'delay') this.claims.within(lease.ms);
    if (result.status === 'paused' && status !== 'paused') {
      // The pause requested while this pass ran took effect at its boundary.
      const paused: NewFrame = { seq: run.nextSeq, kind: 'run_status', fields: { status: 'paused', attempt } };
      await appendFrames(this.o.db, run.id, run.workspaceId, [paused]);
      frames.push(paused);
      run.status = 'paused';
      this.publishLive(run, frames);
      if (handoffs.length) await this.o.outbox.afterCommit({ ids: result.outboxIds, messages: handoffs });
      return false;
    }
    this.publishLive(run, frames);
    if (handoffs.length) await this.o.outbox.afterCommit({ ids: result.outboxIds, messages: handoffs });
    return d.type === 'continue';
  }

  private publishLive(run: HeldRun, frames: NewFrame[]): void {
    const again = run.firstFramesAgain;
    if (again && frames.length > 0) run.firstFramesAgain = undefined;
    publishFrames(this.o.bus, run, frames, again);
  }
}
