/**
 * GroupCalls (engine/threads/group_calls.ts): a group call of the hand-off ring settles once, from
 * its members' settlements under the ids below the group's.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { toErrorRecord } from '../../src/core/errors.js';
import { GroupCalls } from '../../src/engine/threads/group_calls.js';
import type { FromEngine } from '../../src/engine/threads/worker_protocol.js';

const done = (id: number, extra: object = {}): FromEngine => ({ type: 'done', id, ...extra });
const failed = (id: number, message: string): FromEngine => ({ type: 'failed', id, error: toErrorRecord(new Error(message)) });

describe('GroupCalls', () => {
  it('passes on what settles no member of a group', () => {
    const groups = new GroupCalls();
    const message = done(5);
    assert.equal(groups.settle(message), message);
    groups.start(-10, 3);
    assert.equal(groups.settle(message), message);
    const below = done(-14);
    assert.equal(groups.settle(below), below, 'an id below the last member');
    const itself = done(-10);
    assert.equal(groups.settle(itself), itself, "the group's own id is no member's");
  });

  it('tells the group once, when its last member settled, in any order', () => {
    const groups = new GroupCalls();
    groups.start(-10, 3);
    assert.equal(groups.settle(done(-12)), undefined);
    assert.equal(groups.settle(done(-11)), undefined);
    assert.deepEqual(groups.settle(done(-13)), { type: 'done', id: -10 });
    const after = done(-11);
    assert.equal(groups.settle(after), after, 'the group is gone once settled');
  });

  it("hands back the members' results in member order when one has any", () => {
    const groups = new GroupCalls();
    groups.start(-1, 3);
    assert.equal(groups.settle(done(-4, { shape: [2, 3] })), undefined);
    assert.equal(groups.settle(done(-2)), undefined);
    const message = groups.settle(done(-3, { counts: [1, 2] }));
    assert.deepEqual(message, {
      type: 'done',
      id: -1,
      members: [
        undefined,
        { output: undefined, shape: undefined, counts: [1, 2] },
        { output: undefined, shape: [2, 3], counts: undefined },
      ],
    });
  });

  it("fails the group with its first member's failure, once every member settled", () => {
    const groups = new GroupCalls();
    groups.start(-100, 3);
    assert.equal(groups.settle(done(-101)), undefined);
    assert.equal(groups.settle(failed(-103, 'first')), undefined, 'a member is still in the engine');
    const message = groups.settle(failed(-102, 'second'));
    assert.equal(message?.type, 'failed');
    assert.equal(message?.type === 'failed' && message.id, -100);
    assert.match(message?.type === 'failed' ? message.error.message : '', /first/);
    const later = done(-102);
    assert.equal(groups.settle(later), later, 'the group is gone once every member settled');
  });

  it('keeps several groups in flight apart', () => {
    const groups = new GroupCalls();
    groups.start(-1, 2);
    groups.start(-4, 2);
    assert.equal(groups.settle(done(-5)), undefined);
    assert.equal(groups.settle(done(-2)), undefined);
    assert.deepEqual(groups.settle(done(-6)), { type: 'done', id: -4 });
    assert.deepEqual(groups.settle(done(-3)), { type: 'done', id: -1 });
  });
});
