import type { ResolvedStream } from './policy.js';

/** One stored stream message, as the embedded bus keeps it. */
export interface StoredMessage {
  stream: string;
  seq: number;
  subject: string;
  data: Uint8Array;
  msgId: string | undefined;
  /** Publish time, epoch ms. */
  ts: number;
  headers: Record<string, string> | undefined;
}

/** Everything the embedded bus needs to come back after its process died. */
export interface StoredBusState {
  /** `prunedThrough`: highest seq ever pruned, so seqs keep increasing when every message was pruned. */
  streams: Array<{ spec: ResolvedStream; prunedThrough: number }>;
  /** Known durables, so a message is kept for a durable that has not started yet in this process. */
  durables: Array<{ stream: string; durable: string; filterSubject: string | undefined }>;
  /** Every retained message, in any order. */
  messages: StoredMessage[];
  /** Acks of retained messages (a durable's seqs above its implicit floor). */
  acks: Array<{ stream: string; durable: string; seq: number }>;
}

/**
 * Persistence for the embedded bus (kill -9 safety in `pnpm dev`). The bus
 * awaits `append` before `publish` resolves and `ack` before it frees the
 * handler's slot; delivery counts are not stored, so after a restart every
 * unacked message is delivered again starting at `deliveryCount` 1.
 */
export interface EmbeddedBusStore {
  /** Create what is missing and return the saved state. Called once, when the bus starts. */
  load(): Promise<StoredBusState>;
  /** Upsert a stream's config (every `ensureStream`). */
  saveStream(spec: ResolvedStream): Promise<void>;
  /** Upsert a durable (first `consume` of it, or when its filter changes). */
  saveDurable(stream: string, durable: string, filterSubject: string | undefined): Promise<void>;
  /** Store one message. Calls settle in the order they were made (the bus keeps its log in seq order); calls made together may share a write. */
  append(msg: StoredMessage): Promise<void>;
  /** Record that `durable` is done with `seq` (acked or dead-lettered). Calls made together may share a write. */
  ack(stream: string, durable: string, seq: number): Promise<void>;
  /** Drop messages (and their acks) with seq <= `throughSeq`; remember `throughSeq`. */
  prune(stream: string, throughSeq: number): Promise<void>;
}
