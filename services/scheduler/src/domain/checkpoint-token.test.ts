import { describe, expect, it } from '@jest/globals';
import { CheckpointTokens, parseCheckpointToken } from './checkpoint-token.js';

const parsed = (token: string) => parseCheckpointToken(token)!;

describe('CheckpointTokens', () => {
  it('verifies the token it minted for the run at that pass, and only that one', () => {
    const tokens = new CheckpointTokens('replica-a');
    const t = parsed(tokens.mint('run_1', 3));
    expect(tokens.verify('run_1', t)).toBe(true);
    expect(tokens.verify('run_2', t)).toBe(false);
    expect(tokens.verify('run_1', { ...t, pass: 4 })).toBe(false);
    expect(tokens.verify('run_1', { ...t, mac: `${t.mac.slice(0, -1)}${t.mac.endsWith('A') ? 'B' : 'A'}` })).toBe(false);
    expect(new CheckpointTokens('replica-b').verify('run_1', t)).toBe(false);
    expect(new CheckpointTokens('replica-a').verify('run_1', t)).toBe(false);
  });

  it('verifies tokens of earlier passes and of runs minted long ago alike (the MAC is computed again)', () => {
    const tokens = new CheckpointTokens('replica-a', undefined, 2);
    const first = parsed(tokens.mint('run_1', 1));
    const second = parsed(tokens.mint('run_1', 2));
    expect(tokens.verify('run_1', first)).toBe(true);
    expect(tokens.verify('run_1', second)).toBe(true);
    // run_1 falls out of the remembered MACs.
    tokens.mint('run_2', 1);
    const third = parsed(tokens.mint('run_3', 1));
    expect(tokens.verify('run_1', second)).toBe(true);
    expect(tokens.verify('run_3', third)).toBe(true);
    expect(tokens.verify('run_3', { ...second, pass: 1 })).toBe(false);
  });
});
