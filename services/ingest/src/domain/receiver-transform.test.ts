import { describe, expect, it } from '@jest/globals';
import { applyTransform, parseTransform } from './receiver-transform.js';

const problem = (field: string, message: string) => new Error(`${field}: ${message}`);
const plain = { name: 'stripe.event', dedupeId: 'dlv_1' };
const post = { body: { id: 'evt_9', type: 'invoice.paid', amount: 12, data: { object: { total: 12 } } }, headers: { 'content-type': 'application/json' } };

describe('receiver transforms', () => {
  it('without one, the post is the receiver event with the body as its data', () => {
    expect(applyTransform(undefined, post, plain)).toEqual({ kind: 'event', name: 'stripe.event', data: post.body, dedupeId: 'dlv_1' });
    expect(parseTransform(undefined, problem)).toBeUndefined();
    expect(parseTransform(null, problem)).toBeUndefined();
    expect(parseTransform({}, problem)).toBeUndefined();
  });

  it("names the event, takes its data and dedupeId from the post; a number id is its text; what a field leaves out stays the receiver's", () => {
    const t = parseTransform({ name: "'stripe/' + body.type", data: 'body.data.object', id: 'body.amount' }, problem)!;
    expect(applyTransform(t, post, plain)).toEqual({ kind: 'event', name: 'stripe/invoice.paid', data: { total: 12 }, dedupeId: '12' });
    expect(applyTransform({ data: "{'id': body.id, 'kind': body.type}" }, post, plain)).toEqual({
      kind: 'event',
      name: 'stripe.event',
      data: { id: 'evt_9', kind: 'invoice.paid' },
      dedupeId: 'dlv_1',
    });
    expect(applyTransform({ data: '[body.amount, body.data.object.total]' }, post, plain)).toMatchObject({ data: [12, 12] });
  });

  it('`if` false, or failing, filters the post out with the reason', () => {
    expect(applyTransform({ if: "body.type == 'invoice.paid'" }, post, plain)).toMatchObject({ kind: 'event' });
    expect(applyTransform({ if: "body.type == 'charge.failed'" }, post, plain)).toEqual({ kind: 'filtered', reason: 'transform.if is false' });
    expect(applyTransform({ if: 'body.missing.deeper' }, post, plain)).toMatchObject({ kind: 'filtered', reason: expect.stringMatching(/^transform\.if failed/) });
  });

  it('a name that is not a non-empty string, an id that is not text, or a field that fails is a failure naming it', () => {
    expect(applyTransform({ name: 'body.amount' }, post, plain)).toEqual({ kind: 'failed', reason: 'transform.name gave a number, not an event name' });
    expect(applyTransform({ name: "''" }, post, plain)).toEqual({ kind: 'failed', reason: 'transform.name gave an empty string, not an event name' });
    expect(applyTransform({ id: 'body.data' }, post, plain)).toEqual({ kind: 'failed', reason: 'transform.id gave a object, not a string' });
    expect(applyTransform({ data: 'body.nothing' }, post, plain)).toMatchObject({ kind: 'failed', reason: expect.stringMatching(/^transform\.data failed/) });
    expect(applyTransform({ name: "headers['x-github-event']" }, post, plain)).toMatchObject({ kind: 'failed', reason: expect.stringMatching(/^transform\.name failed/) });
  });

  it('is checked where it is written: CEL that compiles over body and headers, a boolean `if`, the four fields only', () => {
    expect(parseTransform({ if: "headers['x-github-event'] != 'ping'", name: "'gh/' + headers['x-github-event']" }, problem)).toEqual({
      if: "headers['x-github-event'] != 'ping'",
      name: "'gh/' + headers['x-github-event']",
    });
    expect(() => parseTransform('body.type', problem)).toThrow(/^transform: must be an object/);
    expect(() => parseTransform({ name: "'a' +" }, problem)).toThrow(/^transform\.name: /);
    expect(() => parseTransform({ name: 'event.name' }, problem)).toThrow(/^transform\.name: .*event/);
    expect(() => parseTransform({ if: '1 + 2' }, problem)).toThrow(/^transform\.if: must be a boolean expression/);
    expect(() => parseTransform({ data: 42 }, problem)).toThrow(/^transform\.data: must be a non-blank CEL expression/);
    expect(() => parseTransform({ data: 'x'.repeat(1025) }, problem)).toThrow(/^transform\.data: is over 1024 characters/);
    expect(() => parseTransform({ map: 'body' }, problem)).toThrow(/^transform\.map: is not a field/);
  });
});
