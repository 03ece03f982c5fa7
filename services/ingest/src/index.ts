export { startIngest } from './main.js';
