import { defineConfig } from 'drizzle-kit';

export default defineConfig({
  dialect: 'postgresql',
  schema: './src/store/schema.ts',
  out: './src/store/migrations',
  schemaFilter: ['ingest'],
});
