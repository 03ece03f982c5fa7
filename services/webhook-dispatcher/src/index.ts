export { startWebhookDispatcher } from './main.js';
