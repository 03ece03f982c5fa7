import { createHash } from 'node:crypto';

// SHA-256 is about half of a runner's replay cost (every pass re-hashes every
// step id it reaches), and step ids repeat across passes and runs, so hashes
// are memoised. Bounded FIFO so a runner with unbounded dynamic ids
// (`fetch-${userId}`) cannot grow without limit.
const CACHE_LIMIT = 10_000;
const cache = new Map<string, string>();

/**
 * SPEC "Step id hashing": lowercase hex SHA-256 over the UTF-8 bytes of the
 * human-readable step id. Used verbatim as the memo key and `Opcode.id`; must
 * be byte-identical across implementations (see test/fixtures/step-ids.json).
 */
export function hashStepId(id: string): string {
  const hit = cache.get(id);
  if (hit !== undefined) return hit;
  const hashed = createHash('sha256').update(id, 'utf8').digest('hex');
  if (cache.size >= CACHE_LIMIT) {
    const oldest = cache.keys().next();
    if (!oldest.done) cache.delete(oldest.value);
  }
  cache.set(id, hashed);
  return hashed;
}

/** One allocated step id: the disambiguated human-readable name and its hash. */
export interface AllocatedStepId {
  /** `x`, `x:1`, `x:2`, ...: what is hashed and reported as `Opcode.name`. */
  name: string;
  /** `hashStepId(name)`. */
  hashed: string;
}

export interface StepIdAllocator {
  /** Allocate the next name for `id` in this pass, in call order. */
  next(id: string): AllocatedStepId;
}

/**
 * Allocates step ids for one pass of a run. SPEC: a step id reused within one
 * run is disambiguated before hashing by a positional suffix: the first use
 * is `x`, then `x:1`, `x:2`, ... Create one allocator per pass: replay is
 * deterministic only if every pass starts counting from zero.
 *
 * If a suffixed name is already taken by an explicit id (a step literally
 * named `x:1`), the counter skips it, so two steps never share a hash.
 */
export function createStepIdAllocator(): StepIdAllocator {
  const used = new Set<string>();
  const counters = new Map<string, number>();
  return {
    next(id: string): AllocatedStepId {
      let name = id;
      if (used.has(id)) {
        let n = counters.get(id) ?? 1;
        while (used.has(`${id}:${n}`)) n++;
        name = `${id}:${n}`;
        counters.set(id, n + 1);
      }
      used.add(name);
      return { name, hashed: hashStepId(name) };
    },
  };
}
