/** The flow-control columns of a run: its concurrency slots, priority and hold. */
export interface SlotFields {
  /** null: no limit. */
  concurrencyKey: string | null;
  concurrencyLimit: number;
  concurrencyKey2: string | null;
  concurrencyLimit2: number;
  concurrencyShared2: boolean;
  priority: number;
  /** A queued singleton: holds its slot from admission to its end. */
  holdsSlots: boolean;
}

/** Flow control as computed for a run (ingest's StartRun, or `runFields` over a child's input). */
export interface SlotRequest {
  concurrencyKey: string;
  /** 0: no limit. */
  concurrencyLimit: number;
  /** A second constraint (0 or absent: none), checked and held beside the first; `shared`: its key's slots are the workspace's. */
  concurrencyKey2?: string;
  concurrencyLimit2?: number;
  concurrencyShared2?: boolean;
  priority: number | bigint;
  /** Holds its slots from admission to its end, parks and pauses included (singleton mode queue). */
  holdsSlots?: boolean;
}

/**
 * The columns as stored: a key only with its limit, and a second constraint
 * or a hold only beside a first limit (a run without one is never held back,
 * so it holds nothing either).
 */
export function slotFields(f: SlotRequest): SlotFields {
  const limited = f.concurrencyLimit > 0;
  const second = limited && (f.concurrencyLimit2 ?? 0) > 0;
  return {
    concurrencyKey: limited ? f.concurrencyKey : null,
    concurrencyLimit: f.concurrencyLimit,
    concurrencyKey2: second ? (f.concurrencyKey2 ?? '') : null,
    concurrencyLimit2: limited ? (f.concurrencyLimit2 ?? 0) : 0,
    concurrencyShared2: second && (f.concurrencyShared2 ?? false),
    priority: Number(f.priority),
    holdsSlots: limited && (f.holdsSlots ?? false),
  };
}
