import { runStandalone } from '@dws/runtime';
import { startWebhookDispatcher } from './main.js';

await runStandalone('webhook-dispatcher', 8293, startWebhookDispatcher);
