import { NonRetriableError } from './errors.js';
import type { AiEvalGenerateOptions, AiEvalScore, AiEvalSummary, AiEvalTaskOptions, AiGenerateRequest, ScoreOptions } from './types.js';

/** SPEC Limits, AI-step defaults: evals fan out over at most 200 items per run; a larger dataset is truncated. */
export const EVAL_MAX_ITEMS = 200;

/** What is left of a run's eval fan-out: one per pass, spent in call order, so every replay cuts the same items. */
export interface EvalBudget {
  left: number;
}

/** SPEC Limits: names are at most 256 characters. */
const NAME_MAX = 256;

/** The steps an eval is made of. */
export interface EvalTools {
  run(id: string, fn: () => unknown): Promise<unknown>;
  generate(id: string, request: AiGenerateRequest): Promise<unknown>;
  score(id: string, options: ScoreOptions): Promise<unknown>;
}

type EvalOptions = AiEvalTaskOptions<unknown, unknown> | AiEvalGenerateOptions<unknown>;

function scoreOf(scored: AiEvalScore, what: string): { value: number; fields: Record<string, unknown> } {
  if (typeof scored === 'number' && Number.isFinite(scored)) return { value: scored, fields: {} };
  if (typeof scored === 'object' && scored !== null && typeof scored.value === 'number' && Number.isFinite(scored.value)) {
    const { value, ...fields } = scored;
    return { value, fields };
  }
  throw new NonRetriableError(
    `${what} must return a finite number or { value: number, ... }, not ${JSON.stringify(scored) ?? String(scored)}`,
  );
}

/**
 * step.ai.eval: the first items of the dataset, up to what is left of the
 * run's 200 (a second eval in the same run gets the rest), all in parallel; per
 * item a durable task step (`<id>:task-<i>`: step.run, or step.ai.generate
 * as `<id>:generate-<i>`), its score computed by `score` and written once
 * (`<id>:score-<i>`, Score opcode: `{ name, value, eval: <id>, index: <i>, ... }`).
 * Resolves with the count, the mean and whether the dataset was truncated.
 * A task step that fails for good rejects the eval with its StepFailedError.
 */
export async function runEval(id: string, options: unknown, tools: EvalTools, budget: EvalBudget): Promise<AiEvalSummary> {
  const what = `step.ai.eval("${id}")`;
  if (typeof options !== 'object' || options === null)
    throw new NonRetriableError(`${what} needs { name, dataset, task | generate, score }`);
  const o = options as EvalOptions & { task?: unknown; generate?: unknown };
  if (typeof o.name !== 'string' || o.name.trim() === '' || o.name.length > NAME_MAX)
    throw new NonRetriableError(`${what}.name must be a non-empty string of at most ${NAME_MAX} characters`);
  if (!Array.isArray(o.dataset)) throw new NonRetriableError(`${what}.dataset must be an array`);
  if ((typeof o.task === 'function') === (typeof o.generate === 'function'))
    throw new NonRetriableError(
      `${what} needs exactly one of task (a function run as a step) or generate (a function returning a model request)`,
    );
  if (typeof o.score !== 'function')
    throw new NonRetriableError(`${what}.score must be a function (item, output, index) => number | { value }`);
  const items = o.dataset.slice(0, Math.max(0, budget.left));
  budget.left -= items.length;
  const name = o.name;
  const scores = await Promise.all(
    items.map(async (item: unknown, i) => {
      const output =
        typeof o.task === 'function'
          ? await tools.run(`${id}:task-${i}`, () => (o as AiEvalTaskOptions<unknown, unknown>).task(item, i))
          : await tools.generate(`${id}:generate-${i}`, (o as AiEvalGenerateOptions<unknown>).generate(item, i));
      const score = o.score as (item: unknown, output: unknown, index: number) => AiEvalScore | Promise<AiEvalScore>;
      const { value, fields } = scoreOf(await score(item, output, i), `${what}.score of item ${i}`);
      // Ours last: the row's name, value and address are not the score function's to change.
      await tools.score(`${id}:score-${i}`, { ...fields, name, value, eval: id, index: i });
      return value;
    }),
  );
  const sum = scores.reduce((a, b) => a + b, 0);
  return {
    name,
    count: items.length,
    total: o.dataset.length,
    truncated: items.length < o.dataset.length,
    mean: scores.length === 0 ? null : sum / scores.length,
    scores,
  };
}
