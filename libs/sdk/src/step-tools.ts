import { parseTags, type InferOpcode, type Opcode, type Usage } from '@dws/protocol';
import { embedInBatches } from './ai-embed.js';
import { EVAL_MAX_ITEMS, runEval, type EvalBudget } from './ai-eval.js';
import { generateChecked } from './ai-output.js';
import { approvalOpcode } from './approval.js';
import { toMs } from './duration.js';
import { normalise } from './json.js';
import type {
  AiEmbedRequest,
  AiGenerateRequest,
  AiRequest,
  ApprovalOptions,
  EmitOptions,
  RunWorkflowOptions,
  ScoreOptions,
  StepRunOptions,
  StepTools,
  WaitForEventOptions,
  WebhookSendOptions,
  WorkflowCtx,
  WorkflowEvent,
} from './types.js';

/** An opcode before the engine gives it its step id. */
export type OpcodeFields = Opcode extends infer O ? (O extends Opcode ? Omit<O, 'id' | 'name'> : never) : never;

/** What the pass engine offers the step tools. */
export interface StepCore {
  /** step.run: run `fn` now (a new step) or answer from the memo. */
  run(id: unknown, fn: unknown, options: StepRunOptions | undefined): Promise<unknown>;
  /**
   * A step the service completes: on a new id, report the opcode `build()`
   * returns and park this branch; on a memo hit, resolve with `onData(data)`.
   * `build` runs before the id is allocated and may throw (a bug in the call:
   * the promise rejects with a NonRetriableError).
   */
  park(label: string, id: unknown, build: () => OpcodeFields, onData?: (data: unknown) => unknown): Promise<unknown>;
}

/** SPEC Limits: names and ids are at most 256 characters. */
const NAME_MAX = 256;

const str = (v: unknown, what: string, max = Number.POSITIVE_INFINITY): string => {
  if (typeof v !== 'string' || v.trim() === '') throw new TypeError(`${what} must be a non-empty string`);
  if (v.length > max) throw new TypeError(`${what} is over ${max} characters`);
  return v;
};

const json = (v: unknown, what: string): unknown => normalise(v, what).value;

function untilMs(until: Date | number | string, what: string): number {
  const ms = until instanceof Date ? until.getTime() : typeof until === 'string' ? Date.parse(until) : until;
  if (typeof ms !== 'number' || !Number.isFinite(ms)) throw new TypeError(`${what} must be a Date, epoch ms or an ISO time`);
  return Math.round(ms);
}

/** step.emit's delay as the Emit opcode carries it (the service validates it and resolves it once). */
function emitDelay(delay: unknown, what: string): number | string {
  if (delay instanceof Date) return new Date(untilMs(delay, `${what}.delay`)).toISOString();
  if (typeof delay === 'number' && Number.isFinite(delay) && delay >= 0) return Math.round(delay);
  if (typeof delay === 'string' && delay.trim() !== '') return delay.trim();
  throw new TypeError(`${what}.delay must be ms, a duration like "2h", or a Date`);
}

/** step.emit's and step.tag's tags, checked as the service checks them (at the call, not a pass later). */
function checkedTags(tags: unknown, what: string): string[] | undefined {
  try {
    return parseTags(tags, 'invalid_event', `${what}.tags`);
  } catch (err) {
    throw new TypeError((err as Error).message);
  }
}

function optionalFields<T extends object>(target: T, source: Record<string, unknown>, keys: string[], what: string, max?: number): T {
  for (const k of keys) {
    const v = source[k];
    if (v === undefined) continue;
    (target as Record<string, unknown>)[k] = str(v, `${what}.${k}`, max);
  }
  return target;
}

/** The `step` object and `ctx.webhook` of one pass, built on the engine's two primitives. */
export function createStepTools(core: StepCore): { step: StepTools; webhook: WorkflowCtx['webhook'] } {
  const label = (kind: string, id: unknown) => `${kind}("${String(id)}")`;
  // SPEC Limits: 200 eval items per run, shared by the run's evals in call order (tools are built per pass).
  const evalBudget: EvalBudget = { left: EVAL_MAX_ITEMS };

  /** One Infer step: `data` is the model request as the service takes it (CONTRACT.md, "AI steps"). */
  const ask = (kind: 'generate' | 'infer' | 'embed', id: unknown, request: unknown): Promise<unknown> =>
    core.park(label(`step.ai.${kind}`, id), id, () => {
      if (typeof request !== 'object' || request === null) throw new TypeError(`${label(`step.ai.${kind}`, id)} needs a request object`);
      const op: Omit<InferOpcode, 'id' | 'name'> = {
        op: 'Infer',
        data: json({ kind, ...request }, `request of ${label(`step.ai.${kind}`, id)}`),
      };
      return op;
    });

  const generate = ((id: string, request: AiGenerateRequest) => {
    if (typeof request !== 'object' || request === null || request.output === undefined) {
      // reasks means nothing without a schema; it is ours, not the provider's.
      const { reasks: _reasks, output: _output, ...rest } = (request ?? {}) as AiGenerateRequest;
      return ask('generate', id, request === null || typeof request !== 'object' ? request : rest);
    }
    return generateChecked(id, request, (stepId, data) => ask('generate', stepId, data));
  }) as StepTools['ai']['generate'];

  const step: StepTools = {
    run: ((id: string, fn: () => unknown, options?: StepRunOptions) => core.run(id, fn, options)) as StepTools['run'],

    sleep: (id, duration) =>
      core.park(
        label('step.sleep', id),
        id,
        () => ({ op: 'Sleep', sleepMs: toMs(duration, label('step.sleep', id)) }),
        () => undefined,
      ) as Promise<void>,

    sleepUntil: (id, until) =>
      core.park(
        label('step.sleepUntil', id),
        id,
        () => ({ op: 'SleepUntil', sleepUntilMs: untilMs(until, label('step.sleepUntil', id)) }),
        () => undefined,
      ) as Promise<void>,

    waitForEvent: <TData>(id: string, options: WaitForEventOptions) =>
      core.park(label('step.waitForEvent', id), id, () => {
        const what = label('step.waitForEvent', id);
        if (typeof options !== 'object' || options === null) throw new TypeError(`${what} needs { event, timeout }`);
        const op: OpcodeFields = {
          op: 'WaitForEvent',
          eventName: str(options.event, `${what}.event`, NAME_MAX),
          timeoutMs: toMs(options.timeout, `${what}.timeout`),
        };
        if (options.if !== undefined) op.eventIf = str(options.if, `${what}.if`);
        return op;
      }) as Promise<WorkflowEvent<TData> | null>,

    runWorkflow: ((id: string, options: RunWorkflowOptions) =>
      core.park(label('step.runWorkflow', id), id, () => {
        const what = label('step.runWorkflow', id);
        if (typeof options !== 'object' || options === null) throw new TypeError(`${what} needs { workflow, data }`);
        const name = typeof options.workflow === 'string' ? options.workflow : options.workflow?.name;
        const op: OpcodeFields = {
          op: 'RunWorkflow',
          childName: str(name, `${what}.workflow`, NAME_MAX),
          childData: json(options.data ?? {}, `data of ${what}`),
        };
        if (options.app !== undefined) op.childApp = str(options.app, `${what}.app`, NAME_MAX);
        if (options.runner !== undefined) op.childRunner = str(options.runner, `${what}.runner`, NAME_MAX);
        return op;
      })) as StepTools['runWorkflow'],

    emit: (id: string, options: EmitOptions) =>
      core.park(label('step.emit', id), id, () => {
        const what = label('step.emit', id);
        if (typeof options !== 'object' || options === null) throw new TypeError(`${what} needs { name, data }`);
        const op: OpcodeFields = {
          op: 'Emit',
          eventName: str(options.name, `${what}.name`, NAME_MAX),
          data: json(options.data ?? {}, `data of ${what}`),
        };
        if (options.delay !== undefined) op.delay = emitDelay(options.delay, what);
        const tags = checkedTags(options.tags, what);
        if (tags) op.tags = tags;
        return optionalFields(op, options as unknown as Record<string, unknown>, ['dedupeId', 'targetApp', 'session'], what, NAME_MAX);
      }),

    approval: (<A>(id: string, options: ApprovalOptions<A>) =>
      // Replay hands back the memoised decision as recorded: the service shaped it.
      core.park(label('step.approval', id), id, () => approvalOpcode(options, label('step.approval', id)))) as StepTools['approval'],

    tag: ((id: string, tags: string[]) =>
      core.park(label('step.tag', id), id, () => {
        const what = label('step.tag', id);
        const given = checkedTags(tags, what);
        if (!given) throw new TypeError(`${what} needs at least one tag`);
        return { op: 'Tag', tags: given };
      })) as StepTools['tag'],

    score: (id: string, options: ScoreOptions) =>
      core.park(label('step.score', id), id, () => {
        const what = label('step.score', id);
        if (typeof options !== 'object' || options === null) throw new TypeError(`${what} needs { name, value }`);
        str(options.name, `${what}.name`, NAME_MAX);
        if (!('value' in options)) throw new TypeError(`${what} needs a value`);
        return { op: 'Score', data: json(options, `score of ${what}`) as ScoreOptions };
      }),

    ai: {
      generate,
      infer: ((id: string, request: AiRequest) => ask('infer', id, request)) as StepTools['ai']['infer'],
      embed: (id: string, request: AiEmbedRequest) => embedInBatches(id, request, (stepId, data) => ask('embed', stepId, data)),
      eval: ((id: string, options: unknown) =>
        runEval(id, options, {
          run: (stepId, fn) => step.run(stepId, fn),
          generate: (stepId, request) => step.ai.generate(stepId, request),
          score: (stepId, options) => step.score(stepId, options),
        }, evalBudget)) as StepTools['ai']['eval'],
      wrap: ((id: string, call: () => unknown, usage: (result: unknown) => Usage | undefined) => {
        if (typeof usage !== 'function') throw new TypeError(`${label('step.ai.wrap', id)} needs a usage function (result => { model, tokensIn, tokensOut, ... })`);
        return core.run(id, call, { usage });
      }) as StepTools['ai']['wrap'],
    },
  };

  const webhook: WorkflowCtx['webhook'] = {
    send: (id: string, options: WebhookSendOptions) =>
      core.park(label('ctx.webhook.send', id), id, () => {
        const what = label('ctx.webhook.send', id);
        if (typeof options !== 'object' || options === null) throw new TypeError(`${what} needs { url, body }`);
        const url = str(options.url, `${what}.url`);
        let protocol = '';
        try {
          protocol = new URL(url).protocol;
        } catch {
          /* reported below */
        }
        if (protocol !== 'http:' && protocol !== 'https:') throw new TypeError(`${what}.url must be an absolute http(s) URL`);
        // Sent as written, not as URL.href: the user's string is what they will look for in the deliveries list.
        return { op: 'Webhook', webhookUrl: url, data: json(options.body ?? null, `body of ${what}`) };
      }),
  };

  return { step, webhook };
}
