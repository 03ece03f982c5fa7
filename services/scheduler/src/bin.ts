import { runStandalone } from '@dws/runtime';
import { startScheduler } from './main.js';

await runStandalone('scheduler', 8290, startScheduler);
