import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import * as ajvFormats from 'ajv-formats';
import { NonRetriableError } from './errors.js';
import { formatIssues, isStandardSchema, type StandardSchemaV1 } from './standard-schema.js';
import type { JsonSchema } from './types.js';

// A marker, not class identity (STYLE): a user's bundle may hold a second copy of the SDK.
const AI_OUTPUT = Symbol.for('dws.sdk.aiOutputInvalid');

/** SPEC Limits, AI-step defaults: one re-ask on invalid output, only when an output schema is set. */
export const DEFAULT_REASKS = 1;

/**
 * What `step.ai.generate` with an `output` schema rejects with once the
 * model's answer still does not parse or validate after the last re-ask.
 * A NonRetriableError: uncaught, the run fails at once (every further pass
 * would replay the same answers); catch it to fall back.
 */
export class AiOutputError extends NonRetriableError {
  /** Stable code to check instead of `instanceof`. */
  readonly code = 'ai_output_invalid';
  /** The step id given to step.ai.generate. */
  readonly stepId: string;
  /** Model calls made: 1 + re-asks. */
  readonly attempts: number;
  /** The last answer's text. */
  readonly text: string;
  /** Why the last answer was refused. */
  readonly reason: string;
  constructor(stepId: string, attempts: number, text: string, reason: string) {
    super(
      `step.ai.generate("${stepId}"): the model's answer does not match the output schema after ${attempts} call${attempts === 1 ? '' : 's'} ` +
        `(${attempts - 1} re-ask${attempts === 2 ? '' : 's'}): ${reason}`,
    );
    this.name = 'AiOutputError';
    this.stepId = stepId;
    this.attempts = attempts;
    this.text = text;
    this.reason = reason;
    (this as unknown as Record<symbol, unknown>)[AI_OUTPUT] = true;
  }
}

/** True for an AiOutputError from any copy of the SDK. */
export function isAiOutputError(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as Record<symbol, unknown>)[AI_OUTPUT] === true;
}

export type OutputCheck = { ok: true; value: unknown } | { ok: false; reason: string };

/** An `output` option made usable: the schema text for the prompt (when there is one) and the check of an answer. */
export interface OutputContract {
  /** JSON Schema shown to the model; undefined for a Standard Schema that cannot say its JSON Schema. */
  jsonSchema: JsonSchema | undefined;
  check(text: string): Promise<OutputCheck>;
}

/**
 * The answer's JSON: the whole text, trimmed. A text that is exactly one
 * fenced block (```json ... ```) counts as its content: models add fences
 * despite being told not to, and the fence is unambiguous.
 */
export function parseAnswer(text: string): { ok: true; value: unknown } | { ok: false; reason: string } {
  let body = text.trim();
  const fenced = /^```[A-Za-z]*[ \t]*\r?\n([\s\S]*?)\r?\n?```$/.exec(body);
  if (fenced) body = (fenced[1] ?? '').trim();
  if (body === '') return { ok: false, reason: 'the answer is empty, not JSON' };
  try {
    return { ok: true, value: JSON.parse(body) as unknown };
  } catch (err) {
    return { ok: false, reason: `the answer is not JSON (${(err as Error).message})` };
  }
}

// Compiled validators by schema text: a schema written inline is a new object every pass.
// A fresh Ajv per schema, so two schemas sharing an $id never collide in one instance.
const compiled = new Map<string, ValidateFunction>();
const COMPILED_MAX = 256;

type AddFormats = (ajv: Ajv) => Ajv;
// ajv-formats is CommonJS: its function is the module itself (Node ESM) or its `default` (TS's view).
const addFormats: AddFormats = (ajvFormats as unknown as { default?: AddFormats }).default ?? (ajvFormats as unknown as AddFormats);

function ajvFor(schema: JsonSchema): Ajv {
  const dialect = typeof schema.$schema === 'string' ? schema.$schema : '';
  // strict: false: annotations models are given (title, description, examples, vendor keys) must not refuse the schema.
  const options = { strict: false, allErrors: true };
  const ajv = /2020-12/.test(dialect) ? new Ajv2020(options) : /2019-09/.test(dialect) ? new Ajv2019(options) : new Ajv(options);
  addFormats(ajv);
  return ajv;
}

/**
 * The JSON Schema validator of `schema`, compiled once per distinct schema.
 * @throws TypeError when ajv cannot compile it (an unknown type, a bad $ref, an unknown dialect)
 */
export function compileJsonSchema(schema: JsonSchema): ValidateFunction {
  const key = JSON.stringify(schema);
  let fn = compiled.get(key);
  if (fn) return fn;
  try {
    const copy = structuredClone(schema);
    // draft-07 (ajv's default) under an https URL, or draft-06 (a subset), validates as draft-07; ajv registers only the http id.
    if (typeof copy.$schema === 'string' && /draft-0[67]/.test(copy.$schema)) delete copy.$schema;
    fn = ajvFor(copy).compile(copy);
  } catch (err) {
    throw new TypeError(`output is not a usable JSON Schema: ${(err as Error).message}`);
  }
  if (compiled.size >= COMPILED_MAX) compiled.delete(compiled.keys().next().value as string);
  compiled.set(key, fn);
  return fn;
}

/** Ajv's errors as one line: `/age must be integer; (root) must have required property 'name'`. */
export function formatAjvErrors(errors: readonly ErrorObject[] | null | undefined): string {
  const lines = (errors ?? []).slice(0, 10).map((e) => {
    const where = e.instancePath === '' ? '(root)' : e.instancePath;
    const params = e.params as Record<string, unknown>;
    const extra =
      e.keyword === 'additionalProperties'
        ? ` (${String(params.additionalProperty)})`
        : e.keyword === 'enum'
          ? ` (${JSON.stringify(params.allowedValues)})`
          : '';
    return `${where} ${e.message ?? 'is invalid'}${extra}`;
  });
  return lines.length > 0 ? lines.join('; ') : 'does not match the schema';
}

/** The JSON Schema a Standard Schema can state (Standard JSON Schema, e.g. zod 4.2+): the shape the model must write. */
function standardJsonSchema(schema: StandardSchemaV1): JsonSchema | undefined {
  const conv = (schema['~standard'] as { jsonSchema?: { input?: (o: { target: string }) => unknown } }).jsonSchema;
  if (typeof conv?.input !== 'function') return undefined;
  try {
    const out = conv.input({ target: 'draft-2020-12' });
    return typeof out === 'object' && out !== null && !Array.isArray(out) ? (out as JsonSchema) : undefined;
  } catch {
    return undefined; // a schema with no JSON Schema form: the model is told "JSON only"
  }
}

/**
 * The contract of an `output` option: a Standard Schema (its own validate,
 * its output value) or a JSON Schema (ajv).
 * @throws TypeError when `output` is neither
 */
export function outputContract(output: unknown): OutputContract {
  if (isStandardSchema(output)) {
    return {
      jsonSchema: standardJsonSchema(output),
      async check(text) {
        const parsed = parseAnswer(text);
        if (!parsed.ok) return parsed;
        const result = await output['~standard'].validate(parsed.value);
        return result.issues ? { ok: false, reason: formatIssues(result.issues, 'output') } : { ok: true, value: result.value };
      },
    };
  }
  if (typeof output !== 'object' || output === null || Array.isArray(output)) {
    throw new TypeError('output must be a JSON Schema object or a Standard Schema (zod, valibot, ...)');
  }
  const schema = output as JsonSchema;
  const validate = compileJsonSchema(schema);
  return {
    jsonSchema: schema,
    check(text) {
      const parsed = parseAnswer(text);
      if (!parsed.ok) return Promise.resolve(parsed);
      return Promise.resolve(
        validate(parsed.value) ? { ok: true, value: parsed.value } : { ok: false, reason: formatAjvErrors(validate.errors) },
      );
    },
  };
}

/** What the system prompt gains: answer with JSON only, matching the schema when there is one to show. */
export function outputInstruction(jsonSchema: JsonSchema | undefined): string {
  const base = 'Answer with JSON only: one JSON value, no prose before or after it, no code fences.';
  return jsonSchema === undefined ? base : `${base} It must match this JSON Schema:\n${JSON.stringify(jsonSchema)}`;
}

/** The user turn of a re-ask: names what was wrong. */
export function reaskMessage(reason: string): string {
  return `Your previous answer was refused: ${reason}. Answer again with JSON only, matching the schema given in the instructions.`;
}

/** One durable model call: park an Infer step under `stepId` with `data` (the engine's `park`). */
export type AskModel = (stepId: string, data: Record<string, unknown>) => Promise<unknown>;

type Message = { role: 'user' | 'assistant'; content: string };

const textOf = (answer: unknown): string => {
  const t = (answer as { text?: unknown } | null | undefined)?.text;
  return typeof t === 'string' ? t : '';
};

/**
 * step.ai.generate with an `output` schema: the first call under `id`, then
 * while the answer does not parse or validate, up to `reasks` more calls
 * (`<id>:reask-1`, ...), each the conversation so far plus the refused
 * answer and a user turn naming what was wrong. Every call is its own
 * durable Infer step, so a replay reads them all back and reaches the same
 * verdicts (the schema must be deterministic, like any handler code).
 */
export async function generateChecked(id: string, request: Record<string, unknown>, ask: AskModel): Promise<Record<string, unknown>> {
  const what = `step.ai.generate("${id}")`;
  const { output, reasks: reasksOption, ...rest } = request;
  const reasks = reasksOption ?? DEFAULT_REASKS;
  if (typeof reasks !== 'number' || !Number.isInteger(reasks) || reasks < 0)
    throw new NonRetriableError(`${what}.reasks must be a non-negative integer`);
  let contract: OutputContract;
  try {
    contract = outputContract(output);
  } catch (err) {
    throw new NonRetriableError(`${what}: ${(err as Error).message}`, { cause: err });
  }
  // Told in the system prompt: both provider shapes take one, and neither needs a field of ours.
  const instruction = outputInstruction(contract.jsonSchema);
  const system = typeof rest.system === 'string' && rest.system.trim() !== '' ? `${rest.system}\n\n${instruction}` : instruction;
  const first: Record<string, unknown> = { ...rest, system };
  // The invoker takes messages over a prompt; a re-ask continues the same conversation.
  let messages: Message[] = Array.isArray(rest.messages)
    ? (rest.messages as Message[])
    : typeof rest.prompt === 'string'
      ? [{ role: 'user', content: rest.prompt }]
      : [];
  const { prompt: _prompt, ...withoutPrompt } = first;

  let answer = await ask(id, first);
  for (let n = 0; ; n++) {
    const text = textOf(answer);
    const verdict = await contract.check(text);
    if (verdict.ok) return { ...(answer as Record<string, unknown>), text, output: verdict.value, reasks: n };
    if (n >= reasks) throw new AiOutputError(id, n + 1, text, verdict.reason);
    // A blank answer is left out: providers refuse an empty assistant turn.
    messages = [
      ...messages,
      ...(text.trim() !== '' ? [{ role: 'assistant' as const, content: text }] : []),
      { role: 'user', content: reaskMessage(verdict.reason) },
    ];
    answer = await ask(`${id}:reask-${n + 1}`, { ...withoutPrompt, messages });
  }
}
