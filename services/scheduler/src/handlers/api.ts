import type { Database } from '@dws/db';
import type { ApiHandler } from '@dws/runtime';
import { runReadsApi } from './reads-api.js';

export { runRecord } from './reads-api.js';

/** Every op the scheduler answers for the gateway: the read side (reads-api.ts) merged with run control. */
export function schedulerApi(db: Database): Record<string, ApiHandler> {
  return { ...runReadsApi(db) };
}
