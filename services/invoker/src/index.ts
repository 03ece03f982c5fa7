export { startInvoker } from './main.js';
