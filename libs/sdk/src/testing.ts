import {
  hashStepId,
  type InvokeContext,
  type Memo,
  type MemoEntry,
  type Opcode,
  type RunnerLogLine,
  type StepError,
} from '@dws/protocol';
import { toStepError } from './errors.js';
import { executePass } from './execution.js';
import { normalise } from './json.js';
import { runnerOf, type Runner } from './runner.js';
import { scriptedApproval, type ApprovalScripts } from './testing-approvals.js';
import type { Workflow, WorkflowHandler } from './types.js';

/** A child run's outcome in a test: its result, or `{ error }` to make it fail. */
export type ChildOutcome = { result: unknown } | { error: StepError | Error | string };

export interface TestWorkflowOptions {
  /** The triggering event. @default `{ name: <workflow name>, data: {} }` */
  event?: { name?: string; data?: unknown };
  /**
   * Starting memo keyed by human-readable step name (`'a'`, `'x:1'`); the
   * helper hashes the keys. Use it to start mid-run or inject a failure.
   */
  steps?: Record<string, MemoEntry>;
  /** Overrides of the invoke ctx (e.g. `{ onFailure: true, error }` to test an onFailure handler). */
  ctx?: Partial<InvokeContext>;
  /** Which workflow of a runner to run. @default its only workflow */
  workflow?: string;
  /** Guard against a workflow that never finishes. @default 1000 */
  maxPasses?: number;
  /**
   * Events for `step.waitForEvent`, by step name. A step with no entry (or
   * null) times out and resolves with null. `name` defaults to the awaited event.
   */
  events?: Record<string, { name?: string; data?: unknown } | null>;
  /**
   * Outcomes of `step.runWorkflow`, by step name. Without an entry, a child
   * defined on the same runner runs in memory; any other child is an error.
   */
  children?: Record<string, ChildOutcome>;
  /**
   * Decisions of `step.approval`: by step name a script (`{ status, args?,
   * response? }`, `{ gated: false }`, `{ timedOut: true }`) or a function of
   * the request, or one function for all. `minRisk` is applied as the
   * service does; `if` is not evaluated (script `{ gated: false }`).
   * @default approved with the proposed args, by `test` via `api`
   */
  approvals?: ApprovalScripts;
  /** Results of `step.ai.*`: by step name, or a function of (request, step name). Required when the workflow uses AI steps. */
  ai?: Record<string, unknown> | ((request: unknown, name: string) => unknown);
  /** What `step.emit`, `ctx.webhook.send` and `step.score` resolve with. @default `{ id: 'test-<step name>' }` */
  recorded?: (op: Opcode) => unknown;
  /** Run-ahead budget of each pass (see `createRunner`). @default the workflow's, else the runner's */
  stepBudgetMs?: number;
  /** Fail the test on a determinism warning (a memo entry the handler did not reach). @default true */
  strict?: boolean;
}

export interface TestWorkflowResult<TResult = unknown> {
  /** What the handler returned, JSON-normalised as the service would store it. */
  result: TResult;
  /** Invoke passes it took (one per 206, plus the final 200, which may also carry the last steps). */
  passes: number;
  /** Names of the step functions that actually ran, in order, retries included. */
  stepsRun: string[];
  /** Every opcode reported, in order (retries included). */
  opcodes: Opcode[];
  /** Log lines of every pass, in order. */
  logs: RunnerLogLine[];
  /** The final memo, keyed by hashed step id. */
  memo: Memo;
}

const stepError = (e: StepError | Error | string): StepError =>
  typeof e === 'string' ? { message: e } : e instanceof Error ? toStepError(e) : e;

/**
 * Runs a workflow to completion in memory, no service needed: each pass's
 * opcodes are fed back as the next pass's memo, as the service would. A
 * failed step is retried up to the workflow's `retry.maxAttempts` (default 1),
 * then memoized as failed. Sleeps complete at once; waits, children,
 * approvals and AI steps take their outcomes from the options. Rejects with
 * the handler's error when the run would fail.
 */
export async function testWorkflow<TResult = unknown>(
  target: Runner | Workflow<never, TResult>,
  options: TestWorkflowOptions = {},
): Promise<TestWorkflowResult<TResult>> {
  const wf = pickWorkflow(target, options.workflow);
  const runner = 'workflows' in target ? target : runnerOf(wf as Workflow);
  const ctx: InvokeContext = {
    runId: 'test-run',
    workflow: wf.name,
    attempt: 0,
    app: runner?.app ?? 'default',
    runner: '',
    ...options.ctx,
  };
  const handler: WorkflowHandler | undefined = ctx.onFailure ? wf.options.onFailure : (wf.handler as unknown as WorkflowHandler);
  if (!handler) throw new Error(`testWorkflow: workflow "${wf.name}" has no onFailure handler`);
  const event = { name: options.event?.name ?? wf.name, data: options.event?.data ?? {} };
  const memo: Memo = {};
  for (const [name, entry] of Object.entries(options.steps ?? {})) memo[hashStepId(name)] = entry;
  const maxAttempts = Math.max(1, wf.options.retry?.maxAttempts ?? 1);
  const maxPasses = options.maxPasses ?? 1000;
  const stepBudgetMs = options.stepBudgetMs ?? wf.options.stepBudgetMs ?? runner?.stepBudgetMs;
  const strict = options.strict ?? true;
  const attempts = new Map<string, number>();
  const stepsRun: string[] = [];
  const opcodes: Opcode[] = [];
  const logs: RunnerLogLine[] = [];
  const recorded = options.recorded ?? ((op: Opcode) => ({ id: `test-${op.name}` }));

  async function complete(op: Opcode): Promise<MemoEntry | undefined> {
    switch (op.op) {
      case 'StepRun': {
        stepsRun.push(op.name);
        if (!op.error) return { data: op.data ?? null };
        const n = (attempts.get(op.id) ?? 0) + 1;
        attempts.set(op.id, n);
        // Left out of the memo, it is retried on the next pass.
        return op.retriable === false || n >= maxAttempts ? { error: op.error } : undefined;
      }
      case 'Sleep':
      case 'SleepUntil':
        return { data: null };
      case 'WaitForEvent': {
        const ev = options.events?.[op.name];
        return { data: ev ? { name: ev.name ?? op.eventName, data: ev.data ?? {} } : null };
      }
      case 'RunWorkflow': {
        const given = options.children?.[op.name];
        if (given) return 'error' in given ? { error: stepError(given.error) } : { data: normalise(given.result, 'child result').value };
        const child = runner?.workflows().find((w) => w.name === op.childName);
        if (!child) {
          throw new Error(`testWorkflow: step "${op.name}" runs workflow "${op.childName}", which this runner does not define; pass { children: { "${op.name}": { result } } }`);
        }
        try {
          const out = await testWorkflow(child as Workflow<never, unknown>, { ...options, event: { data: op.childData }, steps: {}, workflow: undefined, ctx: { ...options.ctx, runId: `${ctx.runId}/${op.name}` } });
          return { data: out.result };
        } catch (err) {
          return { error: toStepError(err) };
        }
      }
      case 'Approval':
        return scriptedApproval(op, options.approvals);
      case 'Infer': {
        const ai = options.ai;
        if (ai === undefined || (typeof ai === 'object' && !(op.name in ai))) {
          throw new Error(`testWorkflow: AI step "${op.name}" needs a result: pass { ai: { "${op.name}": ... } } or { ai: (request) => ... }`);
        }
        const value = typeof ai === 'function' ? await ai(op.data, op.name) : ai[op.name];
        return { data: normalise(value, `AI result of "${op.name}"`).value };
      }
      case 'Emit':
      case 'Webhook':
      case 'Score':
        return { data: normalise(recorded(op), `recorded result of "${op.name}"`).value };
      default:
        throw new Error(`testWorkflow: unknown opcode ${(op as { op: string }).op}`);
    }
  }

  for (let passes = 1; passes <= maxPasses; passes++) {
    // A fresh copy per pass, like a body parsed off the wire.
    const result = await executePass(handler, { event, steps: structuredClone(memo), ctx }, stepBudgetMs === undefined ? {} : { stepBudgetMs });
    logs.push(...result.body.logs);
    if (strict) {
      const drift = result.body.logs.find((l) => l.fields?.determinism === true || /^memo entries never reached/.test(l.message));
      if (drift) throw new Error(`testWorkflow: workflow "${wf.name}" is not deterministic: ${drift.message}`);
    }
    if (result.status !== 200 && result.status !== 206) throw result.error;
    if (result.status === 206 && result.body.opcodes.length === 0) {
      throw new Error(`testWorkflow: workflow "${wf.name}" is parked on a pending step and nothing else can run`);
    }
    // A 200 may carry the steps its pass finished before the handler returned.
    for (const op of result.body.opcodes ?? []) {
      opcodes.push(op);
      const entry = await complete(op);
      if (entry) memo[op.id] = entry;
    }
    if (result.status === 200) return { result: result.body.data as TResult, passes, stepsRun, opcodes, logs, memo };
  }
  throw new Error(`testWorkflow: workflow "${wf.name}" did not finish within ${maxPasses} passes`);
}

function pickWorkflow(target: Runner | Workflow<never, unknown>, name: string | undefined): Workflow<never, unknown> {
  if (!('workflows' in target)) return target;
  const all = target.workflows();
  if (name !== undefined) {
    const wf = all.find((w) => w.name === name);
    if (!wf) throw new Error(`testWorkflow: the runner has no workflow "${name}"`);
    return wf;
  }
  if (all.length !== 1 || !all[0]) {
    throw new Error(`testWorkflow: the runner has ${all.length} workflows; pass { workflow: <name> }`);
  }
  return all[0];
}
