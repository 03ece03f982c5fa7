import { runStandalone } from '@dws/runtime';
import { startIngest } from './main.js';

await runStandalone('ingest', 8289, startIngest);
