import { describe, expect, it } from '@jest/globals';
import { pickRunner } from './routing.js';
import type { RunnerRow } from '../store/runners.js';

const runner = (id: string, workflows: string[]): RunnerRow => ({
  id,
  app: 'a',
  url: `http://x/${id}`,
  transport: 'serve',
  workflows,
  lastSeenMs: 0,
  runtime: null,
  version: null,
  keyFingerprint: null,
  replica: null,
  connectionId: null,
});

describe('pickRunner', () => {
  const rs = [runner('r1', ['w1']), runner('r2', ['w1', 'w2']), runner('r3', ['w3'])];
  it('routes a pinned run only to its runner', () => {
    expect(pickRunner(rs, 'w1', 'r2')?.id).toBe('r2');
    expect(pickRunner(rs, 'w1', 'r3')).toBeUndefined();
    expect(pickRunner(rs, 'w1', 'nope')).toBeUndefined();
    // Avoidance never redirects a pinned run.
    expect(pickRunner(rs, 'w1', 'r2', new Set(['r2']))?.id).toBe('r2');
  });
  it('anycasts among the runners that serve the workflow', () => {
    expect(pickRunner(rs, 'w1', '', new Set(), () => 0)?.id).toBe('r1');
    expect(pickRunner(rs, 'w1', '', new Set(), () => 0.99)?.id).toBe('r2');
    expect(pickRunner(rs, 'w2', '', new Set(), () => 0)?.id).toBe('r2');
    expect(pickRunner(rs, 'missing', '')).toBeUndefined();
  });
  it('prefers runners not to avoid, and falls back to them when nothing else can run it', () => {
    expect(pickRunner(rs, 'w1', '', new Set(['r1']), () => 0)?.id).toBe('r2');
    expect(pickRunner(rs, 'w2', '', new Set(['r2']), () => 0)?.id).toBe('r2');
  });
});
