/**
 * EmbeddedBusStore on Postgres (PGlite in `pnpm dev`, or a real server), in
 * its own schema. Messages and acks are group-committed: those that arrive in
 * one turn, or while a write is in flight, go in one INSERT (in PGlite every
 * statement runs on the one thread all services share); pruning deletes in
 * ranges.
 */
import { GroupCommit } from '@dws/protocol';
import type { EmbeddedBusStore, StoredBusState, StoredMessage } from './embedded-store.js';
import type { ResolvedStream } from './policy.js';

/** The one method the store needs: parameterised SQL returning rows (libs/db `Database` fits). */
export interface SqlClient {
  query(text: string, params?: unknown[]): Promise<Record<string, unknown>[]>;
}

/**
 * Create a store for the embedded bus in schema `schema` (tables created on
 * `load`, i.e. when the bus starts). The driver must send a Uint8Array as bytea
 * (PGlite and postgres.js do).
 * @param schema @default 'bus'
 */
export function createSqlBusStore(sql: SqlClient, schema = 'bus'): EmbeddedBusStore {
  if (!/^[a-z_][a-z0-9_]*$/.test(schema)) throw new Error(`invalid schema name '${schema}'`);
  const t = (name: string) => `"${schema}"."${name}"`;
  // One statement text whatever the batch's size (arrays, not a VALUES list per size): prepared once.
  const appends = new GroupCommit<StoredMessage, void>(
    async (ms) => {
      await sql.query(
        `INSERT INTO ${t('messages')} (stream, seq, subject, data, msg_id, headers, ts)
         SELECT stream, seq, subject, decode(data, 'hex'), msg_id, headers, ts
           FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[])
                AS m(stream, seq, subject, data, msg_id, headers, ts)`,
        [
          ms.map((m) => m.stream), ms.map((m) => m.seq), ms.map((m) => m.subject), ms.map((m) => Buffer.from(m.data).toString('hex')),
          ms.map((m) => m.msgId ?? null), ms.map((m) => (m.headers ? JSON.stringify(m.headers) : null)), ms.map((m) => m.ts),
        ],
      );
      return ms.map(() => undefined);
    },
    (m) => `${m.stream}:${m.seq}`,
  );
  const acks = new GroupCommit<{ stream: string; durable: string; seq: number }, void>(
    async (as) => {
      await sql.query(
        `INSERT INTO ${t('acks')} (stream, durable, seq)
         SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[]) ON CONFLICT DO NOTHING`,
        [as.map((a) => a.stream), as.map((a) => a.durable), as.map((a) => a.seq)],
      );
      return as.map(() => undefined);
    },
    (a) => `${a.stream}:${a.durable}:${a.seq}`,
  );

  return {
    async load(): Promise<StoredBusState> {
      const ddl = [
        `CREATE SCHEMA IF NOT EXISTS "${schema}"`,
        `CREATE TABLE IF NOT EXISTS ${t('streams')} (
           name text PRIMARY KEY, spec text NOT NULL, pruned_through bigint NOT NULL DEFAULT 0)`,
        `CREATE TABLE IF NOT EXISTS ${t('durables')} (
           stream text NOT NULL, name text NOT NULL, filter_subject text, PRIMARY KEY (stream, name))`,
        `CREATE TABLE IF NOT EXISTS ${t('messages')} (
           stream text NOT NULL, seq bigint NOT NULL, subject text NOT NULL, data bytea NOT NULL,
           msg_id text, headers text, ts bigint NOT NULL, PRIMARY KEY (stream, seq))`,
        `CREATE TABLE IF NOT EXISTS ${t('acks')} (
           stream text NOT NULL, durable text NOT NULL, seq bigint NOT NULL, PRIMARY KEY (stream, durable, seq))`,
      ];
      for (const q of ddl) await sql.query(q);
      const streams = await sql.query(`SELECT name, spec, pruned_through FROM ${t('streams')}`);
      const durables = await sql.query(`SELECT stream, name, filter_subject FROM ${t('durables')}`);
      const messages = await sql.query(
        `SELECT stream, seq, subject, data, msg_id, headers, ts FROM ${t('messages')} ORDER BY stream, seq`,
      );
      const acks = await sql.query(`SELECT stream, durable, seq FROM ${t('acks')}`);
      return {
        streams: streams.map((r) => ({
          spec: JSON.parse(String(r.spec)) as ResolvedStream,
          prunedThrough: Number(r.pruned_through),
        })),
        durables: durables.map((r) => ({
          stream: String(r.stream),
          durable: String(r.name),
          filterSubject: r.filter_subject == null ? undefined : String(r.filter_subject),
        })),
        messages: messages.map(
          (r): StoredMessage => ({
            stream: String(r.stream),
            seq: Number(r.seq),
            subject: String(r.subject),
            data: toBytes(r.data),
            msgId: r.msg_id == null ? undefined : String(r.msg_id),
            ts: Number(r.ts),
            headers: r.headers == null ? undefined : (JSON.parse(String(r.headers)) as Record<string, string>),
          }),
        ),
        acks: acks.map((r) => ({ stream: String(r.stream), durable: String(r.durable), seq: Number(r.seq) })),
      };
    },

    async saveStream(spec) {
      await sql.query(
        `INSERT INTO ${t('streams')} (name, spec) VALUES ($1, $2)
         ON CONFLICT (name) DO UPDATE SET spec = EXCLUDED.spec`,
        [spec.name, JSON.stringify(spec)],
      );
    },

    async saveDurable(stream, durable, filterSubject) {
      await sql.query(
        `INSERT INTO ${t('durables')} (stream, name, filter_subject) VALUES ($1, $2, $3)
         ON CONFLICT (stream, name) DO UPDATE SET filter_subject = EXCLUDED.filter_subject`,
        [stream, durable, filterSubject ?? null],
      );
    },

    append: (m) => appends.submit(m),

    ack: (stream, durable, seq) => acks.submit({ stream, durable, seq }),

    async prune(stream, throughSeq) {
      // The high-water mark first: after a crash in between, only extra rows remain, never a reused seq.
      await sql.query(
        `UPDATE ${t('streams')} SET pruned_through = GREATEST(pruned_through, $2) WHERE name = $1`,
        [stream, throughSeq],
      );
      await sql.query(`DELETE FROM ${t('messages')} WHERE stream = $1 AND seq <= $2`, [stream, throughSeq]);
      await sql.query(`DELETE FROM ${t('acks')} WHERE stream = $1 AND seq <= $2`, [stream, throughSeq]);
    },
  };
}

function toBytes(v: unknown): Uint8Array {
  if (v instanceof Uint8Array) return v;
  // Some drivers hand bytea back as '\x…' hex text.
  if (typeof v === 'string' && v.startsWith('\\x')) return Uint8Array.from(Buffer.from(v.slice(2), 'hex'));
  throw new Error('bus store: unexpected bytea value');
}
