import { runStandalone } from '@dws/runtime';
import { startInvoker } from './main.js';

await runStandalone('invoker', 8291, startInvoker);
