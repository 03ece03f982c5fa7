import { describe, expect, it } from '@jest/globals';
import { invokeBody, memoEntry } from './invoke-body.js';

describe('invokeBody', () => {
  it('is valid JSON carrying the memo verbatim', () => {
    const id = 'a'.repeat(64);
    const body = invokeBody(
      { runId: 'run_1', workflow: 'wf "q"', attempt: 2, app: 'default', runner: '', eventName: 'e', inputJson: '{"x":[1,2]}' },
      [memoEntry(id, { dataJson: '{"ok":true}' }), memoEntry('b'.repeat(64), { error: { message: 'boom' } }), memoEntry('c'.repeat(64), { pending: true })],
    );
    expect(JSON.parse(body)).toEqual({
      event: { name: 'e', data: { x: [1, 2] } },
      steps: { [id]: { data: { ok: true } }, ['b'.repeat(64)]: { error: { message: 'boom' } }, ['c'.repeat(64)]: { pending: true } },
      ctx: { runId: 'run_1', workflow: 'wf "q"', attempt: 2, app: 'default', runner: '' },
    });
  });
});
