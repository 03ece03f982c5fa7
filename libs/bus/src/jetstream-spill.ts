/**
 * Claim checks for payloads one NATS message cannot carry. The server caps a
 * message at `max_payload` (1 MiB by default, headers included), while a 1 MiB
 * request body in its envelope, an invoke memo or a run read can be larger.
 * Such a payload goes into a JetStream object store (chunked, so it works on
 * any max_payload and on nats-server 2.9) and the message carries only its
 * name in the `Dws-Spill` header; the receiving side of the adapter swaps it
 * back, so no caller of the Bus port ever sees the difference.
 */
import type { JetStreamClient } from '@nats-io/jetstream';
import { nanos, type MsgHdrs, headers as natsHeaders } from '@nats-io/nats-core';
import { Objm, type ObjectStore } from '@nats-io/obj';
import { randomUUID } from 'node:crypto';

export const SPILL_HEADER = 'Dws-Spill';

/** Room left in a message for headers and protocol framing. */
const HEADROOM_BYTES = 32 * 1024;

/**
 * `transient`: requests, replies and live emits, read within seconds (a request's
 * payload is deleted once read). `durable`: stream messages, which a consumer may
 * read days later, so they live as long as a stream keeps messages by default.
 */
export type SpillKind = 'transient' | 'durable';
const BUCKETS: Record<SpillKind, { name: string; ttlMs: number }> = {
  transient: { name: 'DWS_SPILL_TRANSIENT', ttlMs: 60 * 60 * 1000 },
  durable: { name: 'DWS_SPILL', ttlMs: 7 * 24 * 60 * 60 * 1000 },
};

export const EMPTY = new Uint8Array(0);

export class Spill {
  private readonly stores = new Map<string, Promise<ObjectStore>>();

  constructor(
    private readonly js: JetStreamClient,
    /** The server's max_payload, as it announced it on connect. */
    private readonly maxPayload: () => number,
    /** Copies of each store, as of the bus's streams. */
    private readonly replicas = 1,
  ) {}

  /** True when `data` (plus headers) would not fit in one message. */
  needed(data: Uint8Array): boolean {
    return data.length > this.maxPayload() - HEADROOM_BYTES;
  }

  /** Store `data` and return headers that name it (adding to `into` when given). */
  async put(kind: SpillKind, data: Uint8Array, into?: MsgHdrs): Promise<MsgHdrs> {
    const bucket = BUCKETS[kind];
    const name = randomUUID();
    await (await this.store(bucket.name)).putBlob({ name }, data);
    const h = into ?? natsHeaders();
    h.set(SPILL_HEADER, `${bucket.name}/${name}`);
    return h;
  }

  /**
   * The payload a message stands for: its own data, or the spilled object it
   * names. `consume` deletes the object after reading (only for payloads with
   * exactly one reader: a request or a reply).
   */
  async resolve(msg: { data: Uint8Array; headers?: MsgHdrs }, consume: boolean): Promise<Uint8Array> {
    const ref = msg.headers?.get(SPILL_HEADER);
    if (!ref) return msg.data;
    const slash = ref.indexOf('/');
    const store = await this.store(ref.slice(0, slash));
    const name = ref.slice(slash + 1);
    const data = await store.getBlob(name);
    if (data === null) throw new Error(`spilled payload ${ref} is gone (expired or already read)`);
    if (consume) void store.delete(name).catch(() => undefined);
    return data;
  }

  private store(bucket: string): Promise<ObjectStore> {
    let s = this.stores.get(bucket);
    if (!s) {
      const ttlMs = Object.values(BUCKETS).find((b) => b.name === bucket)?.ttlMs ?? BUCKETS.durable.ttlMs;
      // Created on first use and idempotently: every replica may race here. One made earlier with
      // another count of copies is taken as it is by create(): scaled here, as the bus's streams are.
      s = new Objm(this.js).create(bucket, { ttl: nanos(ttlMs), replicas: this.replicas }).then(async (store) => {
        const jsm = await this.js.jetstreamManager();
        const name = `OBJ_${bucket}`;
        if ((await jsm.streams.info(name)).config.num_replicas !== this.replicas) await jsm.streams.update(name, { num_replicas: this.replicas });
        return store;
      });
      s.catch(() => this.stores.delete(bucket));
      this.stores.set(bucket, s);
    }
    return s;
  }
}

/** Whether a message is a claim check. */
export function isSpilled(headers: MsgHdrs | undefined): boolean {
  return !!headers?.has(SPILL_HEADER);
}
