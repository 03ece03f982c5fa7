export { startFleet, type Fleet } from './fleet.js';
