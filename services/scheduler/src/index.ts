export { startScheduler } from './main.js';
