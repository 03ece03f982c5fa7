import { describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { ROOT } from '../src/processes.js';

/**
 * examples/agent-ai's one command, as a user runs it: the fake model, the
 * service and the runner start, the agent infers, its refund waits on a
 * reviewer who lowers it, and the run ends scored, with each model call's
 * usage printed.
 */
describe('examples/agent-ai demo', () => {
  it('runs the agent loop to a scored reply with the reviewer\'s amount', () => {
    const out = spawnSync('pnpm', ['--filter', '@dws/example-agent-ai', 'demo'], { cwd: ROOT, encoding: 'utf8', timeout: 110_000 });
    const text = `${out.stdout}\n${out.stderr}`;
    expect({ status: out.status, text }).toMatchObject({ status: 0 });
    expect(text).toContain('the agent proposes issue_refund {"amount":120,"orderId":"o-1"} (risk high)');
    expect(text).toContain('run succeeded: {"reply":"Sorry about the cold tea: we refunded 60 to your card.","turns":3}');
    expect(text).toContain('scores: turns=3, quality=0.9');
    expect(text.match(/^model call /gm)).toHaveLength(4);
  }, 120_000);
});
