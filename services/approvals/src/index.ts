export { startApprovals } from './main.js';
