export * from './cel.js';
export * from './policy.js';
