// The two drivers every case runs on. (@dws/testing has the same helpers but
// depends on this package, so these tests carry their own small copy.)
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { openDatabase, type Database } from '../src/index.js';

export interface Target {
  kind: 'pglite' | 'postgres';
  open(): Promise<{ db: Database; url: string | null; close(): Promise<void> }>;
}

export const databaseUrl = process.env.TEST_DATABASE_URL || null;

export const targets: Target[] = [{ kind: 'pglite', open: openEmbedded }];
if (databaseUrl) targets.push({ kind: 'postgres', open: () => openFresh(databaseUrl) });

async function openEmbedded() {
  const db = await openDatabase({});
  return { db, url: null, close: () => db.close() };
}

/** A fresh database on the real server, dropped on close. */
export async function openFresh(adminUrl: string) {
  const name = `t_db_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
  await admin(adminUrl, `create database "${name}"`);
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  const url = u.toString();
  const db = await openDatabase({ url, poolSize: 4 });
  return {
    db,
    url,
    close: async () => {
      await db.close();
      await admin(adminUrl, `drop database if exists "${name}" with (force)`);
    },
  };
}

async function admin(url: string, text: string): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await sql.unsafe(text);
  } finally {
    await sql.end({ timeout: 5 });
  }
}
