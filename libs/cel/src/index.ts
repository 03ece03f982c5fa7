export * from './cel.js';
export * from './policy.js';
export * from './run-fields.js';
export * from './delay.js';
