import { AsyncLocalStorage } from 'node:async_hooks';
import {
  createStepIdAllocator,
  ROOT_SCOPE,
  type InvokeReply200,
  type InvokeReply206,
  type InvokeReplyError,
  type InvokeRequestBody,
  type Opcode,
  type RunnerLogLine,
  type StepRunOpcode,
} from '@dws/protocol';
import {
  isNonRetriableError,
  isStepFailedError,
  NonRetriableError,
  retryAfterMsOf,
  StepFailedError,
  toStepError,
} from './errors.js';
import { MAX_OPCODE_BYTES, MAX_REPLY_BYTES, normalise } from './json.js';
import { createLogCollector } from './logger.js';
import { fitReply, REPLY_OVERHEAD_BYTES } from './reply-size.js';
import { createStepTools, type OpcodeFields } from './step-tools.js';
import type { PassTrace } from './tracing.js';
import type { StepRunOptions, WorkflowContext, WorkflowHandler } from './types.js';

/**
 * Default of `stepBudgetMs`: 0, one new step.run per pass, so every step's
 * result is stored before the next step starts and a crash re-runs only the
 * step in flight. Running ahead is opt-in: the README's measurements show a
 * 500-step no-op run going from 501 passes (~2 s) to 2 passes (~65 ms) with
 * any budget of 5 ms or more, and 10 ms steps within 5% of the floor at
 * 250 ms; the price is that a crash re-runs up to a budget of finished steps.
 */
export const DEFAULT_STEP_BUDGET_MS = 0;

/** The budget the README recommends for step-heavy workflows whose steps are idempotent. */
export const RECOMMENDED_STEP_BUDGET_MS = 250;

/** Stop running ahead once this much opcode JSON is waiting in the reply: the reply is capped at 1 MiB. */
const EAGER_BYTES_LIMIT = 512 * 1024;

/**
 * With checkpoints, how long one pass keeps starting new steps. A step
 * already running finishes; the next pass replays the memo once. Well under
 * the service's invoke timeout (5 minutes by default).
 */
export const CHECKPOINT_PASS_MS = 60_000;

/**
 * Stores finished steps with the service while the pass goes on (and the
 * log lines since the last call). Resolves true once they are durable;
 * false (or a rejection) means they are not known to be stored: the pass
 * then ends and its reply carries them.
 */
export type Checkpoint = (opcodes: StepRunOpcode[], logs: RunnerLogLine[]) => Promise<boolean>;

/**
 * The outcome of one pass, already in wire shape. `status` is the HTTP
 * status of the invoke reply (SPEC Errors, invoke reply statuses).
 */
export type PassResult =
  | { status: 200; body: InvokeReply200 }
  | { status: 206; body: InvokeReply206 }
  /** 400: non-retriable, the run fails. 500: retriable transport error. `error` is what the handler threw. */
  | { status: 400 | 500; body: InvokeReplyError; error: unknown };

export interface ExecuteOptions {
  /**
   * After a new `step.run` completes, keep running the handler, and so the
   * next sequential steps, in the same pass until this many ms have passed
   * since the pass began. Every finished step is reported as its own StepRun
   * opcode in one reply. A step that must park (sleep, wait, child, emit, ...)
   * or fails always ends the pass. 0 runs one new step per pass.
   * @default DEFAULT_STEP_BUDGET_MS
   */
  stepBudgetMs?: number;
  /** Clock for the budget and log timestamps. @default Date.now */
  now?: () => number;
  /**
   * Checkpoint successful new step.runs before the next new step starts;
   * while they are stored, the pass runs on into further steps (up to
   * `checkpointPassMs`) whatever `stepBudgetMs` says, so a long run costs one
   * pass instead of one per step, with the same durability: a crash re-runs
   * only the step in flight. Given by the transport when the invoke carries
   * `ctx.checkpoint`.
   */
  checkpoint?: Checkpoint;
  /** @default CHECKPOINT_PASS_MS */
  checkpointPassMs?: number;
  /** The pass's OpenTelemetry spans (serve sets it when tracing is on here): each new step.run runs in a `step.run` span. */
  trace?: PassTrace;
}

// Which pass and which step the running code belongs to. Log lines take
// their scope from it; steps use it to refuse nesting.
interface ScopeStore {
  pass: object;
  scope: string;
  inStep: boolean;
}
const scopes = new AsyncLocalStorage<ScopeStore>();

type HandlerState = { kind: 'running' } | { kind: 'returned'; value: unknown } | { kind: 'threw'; error: unknown };

/** A discovered new step: its opcode, its serialised size, and (run steps) its result for running ahead. */
interface Found {
  op: Opcode;
  bytes: number;
  /** A fresh copy of a successful step.run result. */
  ahead?: () => unknown;
  /** Stored by a checkpoint: not part of the reply. */
  stored?: boolean;
}

// A fresh never-settling promise per call, not a shared one: reactions
// chained on a module-level promise would be retained forever.
const suspend = (): Promise<never> => new Promise<never>(() => {});

// Marked handled at birth: a memoized failure the handler never awaits
// (it suspended on a new step first) must not become an unhandledRejection
// that kills the process. Awaiting it still throws.
function rejected(err: unknown): Promise<never> {
  const p = Promise.reject(err);
  void p.catch(() => {});
  return p;
}

const nextMacrotask = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

const opBytes = (op: Opcode): number => Buffer.byteLength(JSON.stringify(op), 'utf8');

/**
 * Replays `handler` against the memo in `input.steps` and decides the reply
 * of this pass. Pure apart from what the handler and its steps do: no HTTP.
 *
 * - A memoized step resolves with its data, rejects with a StepFailedError,
 *   or (pending) never settles.
 * - A new step.run runs its function, and a successful result is handed
 *   back at once. Within the step budget the handler runs on into further
 *   steps; past it (and after a failure) no new step starts in this pass.
 *   Any other new step (sleep, wait, child, emit, webhook, approval, AI,
 *   score) is reported and suspends its branch: the service completes it.
 * - The engine waits for every discovered step function to settle and for
 *   queued microtasks to drain, so parallel branches (`Promise.all`) are all
 *   reported in one 206.
 * - New opcodes mean 206, unless they are all successful StepRuns and the
 *   handler then returned without reaching another new step: that is a 200
 *   carrying them (when they fit one reply with the result). Finished work
 *   is never dropped; a throw after them is replayed on the next pass.
 * - Returning gives 200. Throwing a NonRetriableError or a memoized step
 *   failure gives 400; anything else thrown outside a step gives 500.
 * - Parked only on pending steps with nothing new: 206 with no opcodes.
 * - Determinism guard: memo entries the handler never reached are reported
 *   as a warn line (see README, "Rules of replay").
 */
export async function executePass<TData = unknown>(
  handler: WorkflowHandler<TData>,
  input: InvokeRequestBody,
  options: ExecuteOptions = {},
): Promise<PassResult> {
  const now = options.now ?? Date.now;
  const passTrace = options.trace;
  const budgetMs = options.stepBudgetMs ?? DEFAULT_STEP_BUDGET_MS;
  const startedAt = now();
  const pass = {};
  const memo = input.steps;
  const allocator = createStepIdAllocator();
  const visited = new Set<string>();
  const found: Array<Promise<Found | undefined>> = [];
  let foundBytes = 0;
  let frozen = false;
  // Out of budget after a finished step: the handler still gets its result, so a return right
  // after the last step ends the run in this pass (200 with the step); a new step is not started.
  let closed = false;
  let refused = false;
  // Checkpoints go one at a time, in the order the steps finished; the first refusal ends them.
  let checkpoint = options.checkpoint;
  const checkpointPassMs = options.checkpointPassMs ?? CHECKPOINT_PASS_MS;
  // Successful new steps not yet checkpointed, and the checkpoint in flight.
  const unstored: Found[] = [];
  let flushing: Promise<boolean> = Promise.resolve(true);
  let wake: () => void = () => {};
  const suspended = new Promise<void>((resolve) => (wake = resolve));

  const currentScope = (): string => {
    const store = scopes.getStore();
    return store?.pass === pass ? store.scope : ROOT_SCOPE;
  };
  const logs = createLogCollector(currentScope, now);

  /** Common entry of every step: nesting and id checks, id allocation, memo lookup. */
  function reach(
    label: string,
    id: unknown,
    onNew: (name: string, hashed: string) => Promise<unknown>,
    onData: (data: unknown) => unknown,
  ): Promise<unknown> {
    // The reply is decided: later calls come from code still running after
    // it (outside-step I/O), and must neither run nor be reported.
    if (frozen) return suspend();
    const store = scopes.getStore();
    if (store?.pass === pass && store.inStep) {
      return rejected(new NonRetriableError(`${label} was called inside step "${store.scope}"; steps cannot be nested`));
    }
    if (typeof id !== 'string' || id === '') return rejected(new NonRetriableError(`${label} needs a non-empty string id`));
    const { name, hashed } = allocator.next(id);
    const entry = Object.hasOwn(memo, hashed) ? memo[hashed] : undefined;
    if (entry !== undefined) {
      visited.add(hashed);
      if ('data' in entry) return Promise.resolve(onData(entry.data));
      if ('error' in entry) return rejected(new StepFailedError(name, entry.error));
      // Pending: this branch is parked; see whether other branches have work.
      wake();
      return suspend();
    }
    if (closed) {
      // The next pass starts it, after this pass's steps are stored.
      refused = true;
      return suspend();
    }
    return onNew(name, hashed);
  }

  // With checkpoints the pass runs on (up to checkpointPassMs); without, only within the run-ahead budget.
  const mayRunAhead = (): boolean =>
    !frozen && (checkpoint ? now() - startedAt < checkpointPassMs : budgetMs > 0 && now() - startedAt < budgetMs && foundBytes < EAGER_BYTES_LIMIT);

  /**
   * Store the steps finished since the last checkpoint, with the log lines
   * so far. Called before a new step starts: the finished ones are durable
   * before any further step's code runs, and finished steps followed by the
   * handler's return (or a park) ride the reply instead, at no extra round
   * trip. One checkpoint at a time; the first refusal ends them (false).
   */
  function flush(): Promise<boolean> {
    const next = flushing.then(async () => {
      const batch = unstored.splice(0);
      if (!checkpoint) return false;
      if (batch.length === 0) return true;
      const lines = logs.take();
      let ok = false;
      try {
        ok = await checkpoint(batch.map((f) => f.op as StepRunOpcode), lines);
      } catch {
        ok = false;
      }
      if (ok) {
        for (const f of batch) {
          f.stored = true;
          foundBytes -= f.bytes;
        }
        return true;
      }
      // The pass is over: no new step starts, and the reply carries these steps and lines.
      logs.restore(lines);
      checkpoint = undefined;
      closed = true;
      return false;
    });
    flushing = next;
    return next;
  }

  async function runNewStep(name: string, hashed: string, fn: () => unknown, options: StepRunOptions | undefined): Promise<Found> {
    const op: StepRunOpcode = { op: 'StepRun', id: hashed, name, startedAtMs: Date.now() };
    let ahead: (() => unknown) | undefined;
    try {
      if (options?.input !== undefined) op.input = normalise(options.input, `input of step "${name}"`).value;
      const value: unknown = await scopes.run({ pass, scope: name, inStep: true }, passTrace ? () => passTrace.step(name, hashed, fn) : fn);
      const result = normalise(value, `result of step "${name}"`);
      op.data = result.value;
      const usage = options?.usage?.(result.value);
      if (usage !== undefined) op.usage = usage;
      // The handler gets its own copy: mutating it must not change what is reported.
      ahead = () => JSON.parse(result.text) as unknown;
    } catch (err) {
      delete op.data;
      op.error = toStepError(err);
      op.retriable = !isNonRetriableError(err);
      const retryAfterMs = retryAfterMsOf(err);
      if (retryAfterMs !== undefined) op.retryAfterMs = retryAfterMs;
    }
    let bytes = opBytes(op);
    if (bytes > MAX_OPCODE_BYTES) {
      // Input and result each fit, together they do not: retrying cannot help.
      const error = new NonRetriableError(`step "${name}" reports ${bytes} bytes of input and result; an invoke reply is capped at 1 MiB`);
      for (const k of ['data', 'input', 'retryAfterMs'] as const) delete op[k];
      Object.assign(op, { error: toStepError(error), retriable: false });
      ahead = undefined;
      bytes = opBytes(op);
    }
    foundBytes += bytes;
    return ahead ? { op, bytes, ahead } : { op, bytes };
  }

  const { step, webhook } = createStepTools({
    run(id, fn, options) {
      if (typeof fn !== 'function') return rejected(new NonRetriableError(`step.run("${String(id)}") needs a function`));
      return reach(
        `step.run("${String(id)}")`,
        id,
        (name, hashed) => {
          const run = (): Promise<Found> =>
            runNewStep(name, hashed, fn as () => unknown, options).then((f) => {
              if (f.ahead && checkpoint) unstored.push(f);
              return f;
            });
          // Steps finished before this one are stored before it starts; refused, it does not start.
          const p: Promise<Found | undefined> =
            checkpoint && unstored.length > 0 ? flush().then((ok) => (ok ? run() : ((refused = true), undefined))) : run();
          found.push(p);
          wake();
          return p.then((f) => {
            if (!f?.ahead) return suspend();
            if (!mayRunAhead()) closed = true;
            return f.ahead();
          });
        },
        (data) => data,
      );
    },
    park(label, id, build, onData = (data) => data) {
      let fields: OpcodeFields;
      try {
        fields = build();
      } catch (err) {
        return rejected(isNonRetriableError(err) ? err : new NonRetriableError((err as Error).message, { cause: err }));
      }
      return reach(
        label,
        id,
        (name, hashed) => {
          const op = { ...fields, id: hashed, name } as Opcode;
          const bytes = opBytes(op);
          if (bytes > MAX_OPCODE_BYTES) {
            return rejected(new NonRetriableError(`${label} reports ${bytes} bytes; an invoke reply is capped at 1 MiB`));
          }
          foundBytes += bytes;
          found.push(Promise.resolve({ op, bytes }));
          wake();
          return suspend();
        },
        onData,
      );
    },
  });

  const context: WorkflowContext<TData> = {
    event: input.event as WorkflowContext<TData>['event'],
    step,
    ctx: { ...input.ctx, webhook },
    logger: logs.logger,
  };

  // A holder, not a `let`: the callbacks below assign it, and TS would
  // otherwise keep its narrowing to 'running'.
  const handlerState: { current: HandlerState } = { current: { kind: 'running' } };
  const settled = scopes
    .run({ pass, scope: ROOT_SCOPE, inStep: false }, () => new Promise<unknown>((resolve) => resolve(handler(context))))
    .then(
      (value) => {
        handlerState.current = { kind: 'returned', value };
      },
      (error: unknown) => {
        handlerState.current = { kind: 'threw', error };
      },
    );

  await Promise.race([settled, suspended]);

  // Collect every step discovered: wait for the discovered step functions,
  // then let microtasks (memo hits resolving, Promise.all siblings, the
  // handler running ahead) run, and repeat until no new step shows up.
  let seen = -1;
  while (seen !== found.length) {
    seen = found.length;
    await Promise.all(found);
    await nextMacrotask();
  }
  frozen = true;
  const news = (await Promise.all(found)).filter((f): f is Found => f !== undefined && !f.stored).map((f) => f.op);
  const state = handlerState.current;

  if (news.length > 0 && state.kind === 'returned' && !refused && news.every((o) => o.op === 'StepRun' && o.error === undefined)) {
    const done = finalReply(news, state.value);
    if (done) return done;
  }
  if (news.length > 0) {
    guardDeterminism(news.map((o) => o.name));
    const fitted = fitReply(news, logs.freeze(), MAX_REPLY_BYTES);
    return { status: 206, body: { opcodes: fitted.opcodes, logs: fitted.logs } };
  }
  if (state.kind === 'threw') {
    const status = isNonRetriableError(state.error) || isStepFailedError(state.error) ? 400 : 500;
    return { status, body: { error: toStepError(state.error), logs: fitReply([], logs.freeze(), MAX_REPLY_BYTES).logs }, error: state.error };
  }
  if (state.kind === 'running') return { status: 206, body: { opcodes: [], logs: fitReply([], logs.freeze(), MAX_REPLY_BYTES).logs } };

  let data: unknown;
  try {
    data = normalise(state.value, 'workflow result').value;
  } catch (err) {
    return { status: 400, body: { error: toStepError(err), logs: logs.freeze() }, error: err };
  }
  guardDeterminism([]);
  return { status: 200, body: { data, logs: fitReply([], logs.freeze(), MAX_REPLY_BYTES - opBytesOf(data)).logs } };

  /** The handler returned right after its last steps: 200 carrying them, when result and steps fit one reply. */
  function finalReply(steps: Opcode[], value: unknown): PassResult | undefined {
    let data: unknown;
    try {
      data = normalise(value, 'workflow result').value;
    } catch {
      return undefined; // the next pass replays the steps and reports the bad result
    }
    // foundBytes already measured every step (one comma each besides).
    const room = MAX_REPLY_BYTES - opBytesOf(data) - foundBytes - steps.length;
    if (room < REPLY_OVERHEAD_BYTES) return undefined;
    guardDeterminism([]);
    return { status: 200, body: { data, logs: fitReply([], logs.freeze(), room).logs, opcodes: steps } };
  }

  /**
   * Memo entries this pass never reached mean the code changed between
   * passes (a renamed or removed step) or branches on something outside a
   * step. Reported, not fatal: the run may still be right, and the service
   * keeps the stored results either way.
   */
  function guardDeterminism(newNames: string[]): void {
    const unreached = Object.keys(memo).filter((id) => !visited.has(id));
    if (unreached.length === 0) return;
    const list = `${unreached.slice(0, 10).join(', ')}${unreached.length > 10 ? ', ...' : ''}`;
    const message =
      newNames.length === 0
        ? `memo entries never reached: ${list}`
        : `determinism: ${unreached.length} memo entr${unreached.length === 1 ? 'y was' : 'ies were'} not reached while new step ` +
          `${newNames.slice(0, 5).map((n) => `"${n}"`).join(', ')}${newNames.length > 5 ? ', ...' : ''} ran: did a step id change ` +
          `between passes, or does the code branch on something outside a step? Unreached: ${list}`;
    logs.write('warn', message, { count: unreached.length, determinism: true });
  }
}

function opBytesOf(data: unknown): number {
  return Buffer.byteLength(JSON.stringify(data) ?? 'null', 'utf8');
}
