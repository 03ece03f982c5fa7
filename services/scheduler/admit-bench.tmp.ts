import path from 'node:path';
import { openDatabase, migrate } from '@dws/db';
import { admitToSlots } from './src/store/flow.js';

const db = await openDatabase({ url: 'postgres://postgres@127.0.0.1:5432/admitbench', poolSize: 3 });
await migrate(db, { schema: 'scheduler', migrationsDir: path.resolve('src/store/migrations') });
const N = Number(process.argv[2] ?? 100000);
const two = process.argv[3] === 'two';
await db.query(`delete from scheduler.runs`);
await db.query(
  `insert into scheduler.runs (id, workspace_id, workflow, app, runner, status, trigger_kind, input, concurrency_key, concurrency_limit, admitted, concurrency_key_2, concurrency_limit_2, created_at)
   select 'r'||g, 'ws', 'w', 'a', '', 'queued', 'event', '{}', 'k', 10, false, case when $2 then 'u'||(g % 5000) end, case when $2 then 1 else 0 end, now() - (($1 - g) * interval '1 ms')
     from generate_series(1, $1) g`,
  [N, two],
);
await db.query('analyze scheduler.runs');
for (let i = 0; i < 5; i++) {
  const t = performance.now();
  const n = await admitToSlots(db);
  console.log(`round ${i}: admitted ${n} in ${(performance.now() - t).toFixed(1)} ms`);
}
await db.close();
