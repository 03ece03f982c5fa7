/**
 * Internal hooks on the Database objects this lib builds (not part of the
 * port): the migration runner needs a multi-statement exec, which PGlite's
 * extended-protocol `query` cannot do.
 */
export const execScript = Symbol('dws.db.execScript');

export interface ScriptRunner {
  /** Run SQL text that may hold several statements, no parameters. */
  [execScript](text: string): Promise<void>;
}

export function hasExecScript(db: object): db is ScriptRunner {
  return typeof (db as Partial<ScriptRunner>)[execScript] === 'function';
}
