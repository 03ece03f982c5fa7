// Creates a PGlite data directory and exits (see initDataDir in pglite-driver.ts):
// initdb grows the WASM heap to ~600 MB, which a process never gets back.
import { PGlite } from '@electric-sql/pglite';

const pg = await PGlite.create({ dataDir: process.argv[2] });
await pg.close();
