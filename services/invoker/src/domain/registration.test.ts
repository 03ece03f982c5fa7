import { describe, expect, it } from '@jest/globals';
import { parseRegistration } from './registration.js';

const body = (workflow: Record<string, unknown>) => ({ app: 'a', url: 'http://runner/invoke', workflows: [{ name: 'w', ...workflow }] });
const parse = (workflow: Record<string, unknown>) => () => parseRegistration(body(workflow), { transport: 'serve' });

describe('registration: expressions are checked where they are written (issue #5)', () => {
  it('rejects a CEL filter or key that does not compile, and a bad cron, with a clear 400', () => {
    expect(parse({ triggers: [{ event: 'e', if: 'event.data. ==' }] })).toThrow(expect.objectContaining({ status: 400, code: 'invalid_registration' }));
    expect(parse({ triggers: [{ event: 'e', if: 'evnt.data.x > 1' }] })).toThrow(/workflows\[0\]: triggers\[0\]\.if does not compile: Unknown variable: evnt/);
    expect(parse({ concurrency: { limit: 2, key: 'event.data.(' } })).toThrow(/concurrency\.key does not compile/);
    expect(parse({ triggers: [{ cron: '99 * * * *' }] })).toThrow(/cron "99 \* \* \* \*" is not valid/);
    expect(parse({ rateLimit: { limit: 5, period: 'soon' } })).toThrow(/rateLimit\.period must be a duration/);
  });
  it('accepts valid filters, keys, crons with time zones and flow control', () => {
    const r = parseRegistration(
      body({
        triggers: [{ event: 'order.*', if: 'event.data.total > 10' }, { cron: 'TZ=Europe/Paris 0 9 * * *' }],
        concurrency: { limit: 2, key: 'event.data.user' },
        debounce: { period: '5s' },
        idempotency: 'event.data.id',
      }),
      { transport: 'serve' },
    );
    expect(r.workflows[0]!.name).toBe('w');
  });
});
