import { NonRetriableError } from './errors.js';
import type { AskModel } from './ai-output.js';
import type { AiEmbedResult } from './types.js';

/** SPEC Limits, AI-step defaults: 100 inputs per durable embedding batch (option batchSize). */
export const DEFAULT_EMBED_BATCH_SIZE = 100;

/**
 * step.ai.embed: `inputs` cut into batches of `batchSize`, one durable Infer
 * step per batch (`<id>:batch-0`, `<id>:batch-1`, ...), all reported at once
 * (parallel steps); the vectors come back concatenated in input order. A
 * replay reads each batch back; a failed batch rejects with its step error.
 */
export async function embedInBatches(id: string, request: unknown, ask: AskModel): Promise<AiEmbedResult> {
  const what = `step.ai.embed("${id}")`;
  if (typeof request !== 'object' || request === null || Array.isArray(request))
    throw new NonRetriableError(`${what} needs { model, inputs }`);
  const { inputs, batchSize = DEFAULT_EMBED_BATCH_SIZE, ...rest } = request as Record<string, unknown>;
  if (!Array.isArray(inputs) || !inputs.every((x) => typeof x === 'string'))
    throw new NonRetriableError(`${what}.inputs must be an array of strings`);
  if (typeof batchSize !== 'number' || !Number.isInteger(batchSize) || batchSize < 1)
    throw new NonRetriableError(`${what}.batchSize must be a positive integer`);
  const batches: string[][] = [];
  for (let i = 0; i < inputs.length; i += batchSize) batches.push(inputs.slice(i, i + batchSize) as string[]);
  const answers = await Promise.all(batches.map((batch, i) => ask(`${id}:batch-${i}`, { ...rest, inputs: batch })));
  const embeddings: number[][] = [];
  answers.forEach((answer, i) => {
    const got = (answer as { embeddings?: unknown } | null)?.embeddings;
    const want = batches[i]?.length ?? 0;
    if (!Array.isArray(got) || got.length !== want) {
      throw new NonRetriableError(`${what}: batch ${i} answered ${Array.isArray(got) ? got.length : 'no'} embeddings for ${want} inputs`);
    }
    embeddings.push(...(got as number[][]));
  });
  const model = (answers[0] as { response?: { model?: unknown } } | undefined)?.response?.model;
  return { embeddings, ...(typeof model === 'string' ? { model } : {}), batches: batches.length };
}
