/** CallTable (core/call_table.ts): calls in flight by id, in slots and beside them. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CallTable } from '../../src/core/call_table.js';

describe('CallTable', () => {
  it('takes each call once, by its id, message ids (up) and ring ids (down) alike', () => {
    const pending = new CallTable<string>();
    for (let id = 1; id <= 100; id++) pending.set(id, `m${id}`);
    for (let id = -1; id >= -100; id--) pending.set(id, `r${id}`);
    assert.equal(pending.size, 200);
    assert.equal(pending.take(-50), 'r-50');
    assert.equal(pending.take(-50), undefined, 'taken already');
    assert.equal(pending.take(50), 'm50');
    assert.equal(pending.take(1000), undefined, 'never waited on');
    assert.equal(pending.size, 198);
  });

  it('keeps ids that share a slot apart (more in flight than slots), and the extremes of int32', () => {
    const pending = new CallTable<number>();
    // 4096 slots: ids 4096 apart share one.
    const ids = [7, 7 + 4096, 7 - 4096 * 3, -0x8000_0000, 0x7fff_ffff, -1];
    for (const id of ids) pending.set(id, id);
    assert.equal(pending.take(7 + 4096), 7 + 4096, 'the one beside the slot');
    assert.equal(pending.take(7), 7, "the slot's own");
    pending.set(7 + 4096 * 2, 1);
    assert.equal(pending.take(7 + 4096 * 2), 1);
    for (const id of [7 - 4096 * 3, -0x8000_0000, 0x7fff_ffff, -1]) assert.equal(pending.take(id), id);
    assert.equal(pending.size, 0);
  });

  it('hands every call over once to takeAll, and is empty after', () => {
    const pending = new CallTable<number>();
    const ids = Array.from({ length: 5000 }, (_, i) => (i % 2 === 0 ? i + 1 : -i));
    for (const id of ids) pending.set(id, id);
    pending.set(1 + 4096 * 5, 0);
    const all = pending.takeAll();
    assert.deepEqual(
      all.sort((a, b) => a - b),
      [...ids, 0].sort((a, b) => a - b),
    );
    assert.equal(pending.size, 0);
    assert.equal(pending.take(1), undefined);
    assert.deepEqual(pending.takeAll(), []);
    pending.set(3, 3);
    pending.set(3 + 4096, 4);
    assert.deepEqual(pending.values().sort(), [3, 4], 'values() leaves them in');
    assert.equal(pending.size, 2);
  });
});
