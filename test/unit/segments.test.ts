import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  blocksFromCounts,
  chunkLength,
  chunkOffset,
  evenBlocks,
  segmentCount,
  segmentLength,
} from '../../src/algorithms/segments.js';
import { InvalidArgumentError } from '../../src/core/errors.js';

describe('chunks', () => {
  it('puts the remainder on the first chunks', () => {
    assert.deepEqual(evenBlocks(10, 4), { offsets: [0, 3, 6, 8], lengths: [3, 3, 2, 2] });
    assert.deepEqual(evenBlocks(12, 4), { offsets: [0, 3, 6, 9], lengths: [3, 3, 3, 3] });
    assert.deepEqual(evenBlocks(7, 1), { offsets: [0], lengths: [7] });
  });

  it('handles fewer elements than parts, and none', () => {
    assert.deepEqual(evenBlocks(2, 5), { offsets: [0, 1, 2, 2, 2], lengths: [1, 1, 0, 0, 0] });
    assert.deepEqual(evenBlocks(0, 3), { offsets: [0, 0, 0], lengths: [0, 0, 0] });
  });

  it('tiles the range exactly, sizes within one, for every small case', () => {
    for (let parts = 1; parts <= 9; parts++) {
      for (let count = 0; count <= 60; count++) {
        let next = 0;
        for (let i = 0; i < parts; i++) {
          const length = chunkLength(count, parts, i);
          assert.equal(chunkOffset(count, parts, i), next, `offset ${count}/${parts}[${i}]`);
          assert.equal(length, Math.floor(count / parts) + (i < count % parts ? 1 : 0), `length ${count}/${parts}[${i}]`);
          next += length;
        }
        assert.equal(next, count);
      }
    }
  });

  it('refuses a bad count or number of parts', () => {
    assert.throws(() => evenBlocks(4, 0), InvalidArgumentError);
    assert.throws(() => chunkLength(-1, 2, 0), InvalidArgumentError);
    assert.throws(() => chunkOffset(1.5, 2, 0), InvalidArgumentError);
  });
});

describe('blocksFromCounts', () => {
  it('lays uneven and empty blocks back to back', () => {
    assert.deepEqual(blocksFromCounts([3, 0, 5, 0]), { offsets: [0, 3, 3, 8], lengths: [3, 0, 5, 0] });
    assert.deepEqual(blocksFromCounts([]), { offsets: [], lengths: [] });
  });

  it('names the bad entry', () => {
    assert.throws(() => blocksFromCounts([1, -2]), /counts\[1\]/);
  });
});

describe('segments', () => {
  it('cuts a chunk into full segments and a shorter last one', () => {
    assert.equal(segmentCount(0, 4), 0);
    assert.equal(segmentCount(1, 4), 1);
    assert.equal(segmentCount(8, 4), 2);
    assert.equal(segmentCount(9, 4), 3);
    assert.deepEqual(
      [0, 1, 2, 3].map((k) => segmentLength(9, 4, k)),
      [4, 4, 1, 0],
    );
    assert.throws(() => segmentCount(9, 0), InvalidArgumentError);
  });
});
