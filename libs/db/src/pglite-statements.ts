import { parse, protocol, type PGlite, type QueryOptions, type Results, type Transaction } from '@electric-sql/pglite';

const { serialize } = protocol;

/** Distinct statement texts kept prepared; the least recently used is closed past this. */
const CAPACITY = 256;

/** Postgres' "cached plan must not change result type": a table under a statement changed shape. */
const PLAN_SHAPE_CHANGED = '0A000';

/** What drizzle's PGlite session and this lib's Database call on a PGlite connection. */
export interface PgliteQueries {
  query<T>(text: string, params?: unknown[], options?: QueryOptions): Promise<Results<T>>;
}

export interface PgliteClient extends PgliteQueries {
  transaction<T>(fn: (tx: PgliteTx) => Promise<T>): Promise<T>;
}

export type PgliteTx = PgliteQueries & Pick<Transaction, 'exec' | 'rollback' | 'closed'>;

interface Prepared {
  name: string;
  paramOids: number[];
}

/**
 * PGlite's own `query` runs each statement as an unnamed one: six protocol
 * messages, each a call into the WebAssembly, with Postgres parsing and
 * planning the text every time (~100 µs for `select $1` here, against ~15
 * µs to execute it prepared). This client prepares each distinct text once
 * under a name, as postgres.js does on a server, and runs it as one
 * Bind/Describe/Execute/Sync message. Same locks as PGlite's `query`; same
 * results (PGlite's own result parser, parsers and serializers).
 */
export function preparedClient(pg: PGlite): PgliteClient {
  const statements = new Statements(pg);
  return {
    async query<T>(text: string, params?: unknown[], options?: QueryOptions) {
      const result = await pg._runExclusiveTransaction(() => statements.run<T>(text, params, options, true));
      await pg.syncToFs();
      return result;
    },
    transaction: (fn) =>
      pg.transaction((tx) =>
        fn({
          query: <T>(text: string, params?: unknown[], options?: QueryOptions) => {
            if (tx.closed) return Promise.reject(new Error('Transaction is closed'));
            return statements.run<T>(text, params, options, false);
          },
          exec: (text, options) => tx.exec(text, options),
          rollback: () => tx.rollback(),
          get closed() {
            return tx.closed;
          },
        }),
      ),
  };
}

class Statements {
  /** Text -> its prepared statement, least recently used first. */
  readonly #byText = new Map<string, Prepared>();
  #next = 0;

  constructor(private readonly pg: PGlite) {}

  /** Runs `text` under PGlite's query lock; `mayRetry` outside a transaction, where a failed statement leaves nothing aborted. */
  run<T>(text: string, params: unknown[] = [], options: QueryOptions | undefined, mayRetry: boolean): Promise<Results<T>> {
    // A caller-given parameter type changes what is prepared: PGlite's own path.
    if (options?.paramTypes) return this.pg.query<T>(text, params, options);
    if (this.pg.closed) return Promise.reject(new Error('PGlite is closed'));
    return this.pg
      .runExclusive(async () => {
        try {
          return await this.#execute<T>(text, params, options);
        } catch (err) {
          // A table under a cached plan changed shape: prepare the text again.
          if ((err as { code?: string }).code !== PLAN_SHAPE_CHANGED || !this.#byText.has(text)) throw err;
          await this.#close(text);
          if (!mayRetry) throw err;
          return this.#execute<T>(text, params, options);
        }
      })
      .catch((err: unknown) => {
        throw withQuery(err, text, params, options);
      });
  }

  async #execute<T>(text: string, params: unknown[], options: QueryOptions | undefined): Promise<Results<T>> {
    const stmt = await this.#prepared(text);
    const values = params.map((param, i) => {
      if (param === null || param === undefined) return null;
      const oid = stmt.paramOids[i]!;
      const serializer = options?.serializers?.[oid] ?? this.pg.serializers[oid];
      return serializer ? serializer(param) : String(param);
    });
    const messages = await this.pg.execProtocolStream(
      concat([
        serialize.bind({ statement: stmt.name, values: values as string[] }),
        serialize.describe({ type: 'P' }),
        serialize.execute({}),
        serialize.sync(),
      ]),
      { syncToFs: false },
    );
    return parse.parseResults(messages, this.pg.parsers, options)[0] as Results<T>;
  }

  async #prepared(text: string): Promise<Prepared> {
    const known = this.#byText.get(text);
    if (known) {
      this.#byText.delete(text);
      this.#byText.set(text, known);
      return known;
    }
    if (this.#byText.size >= CAPACITY) await this.#close(this.#byText.keys().next().value!);
    const name = `dws_${(this.#next++).toString(36)}`;
    const messages = await this.pg.execProtocolStream(
      concat([serialize.parse({ name, text }), serialize.describe({ type: 'S', name }), serialize.sync()]),
      { syncToFs: false },
    );
    const stmt = { name, paramOids: parse.parseDescribeStatementResults(messages) };
    this.#byText.set(text, stmt);
    return stmt;
  }

  async #close(text: string): Promise<void> {
    const stmt = this.#byText.get(text);
    if (!stmt) return;
    this.#byText.delete(text);
    await this.pg.execProtocolStream(concat([serialize.close({ type: 'S', name: stmt.name }), serialize.sync()]), {
      syncToFs: false,
    });
  }
}

/** The statement and its values on the error, as PGlite's own `query` puts them. */
function withQuery(err: unknown, query: string, params: unknown[], queryOptions: QueryOptions | undefined): unknown {
  if (err && typeof err === 'object' && 'code' in err) Object.assign(err, { query, params, queryOptions });
  return err;
}

function concat(parts: Uint8Array[]): Uint8Array {
  let length = 0;
  for (const p of parts) length += p.length;
  const out = new Uint8Array(length);
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.length;
  }
  return out;
}
