/** ReusePool: arrays come back by exact length, within the bytes it may keep. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ReusePool } from '../../src/core/reuse_pool.js';

test('a given-back array is taken again for its length only, once, and the pool keeps at most its bytes', () => {
  const pool = new ReusePool(100);
  const a = pool.take(40);
  a.fill(7);
  pool.give(a);
  assert.notEqual(pool.take(41), a, 'another length gets a fresh array');
  const again = pool.take(40);
  assert.equal(again, a);
  assert.equal(again[0], 7, 'with its old bytes: the taker overwrites them');
  assert.notEqual(pool.take(40), a, 'taken once');
  const [b, c, d] = [pool.take(40), pool.take(40), pool.take(40)];
  pool.give(b);
  pool.give(c);
  pool.give(d); // past 100 bytes kept: left to the GC
  const taken = [pool.take(40), pool.take(40), pool.take(40)];
  assert.deepEqual(
    taken.map((t) => t === b || t === c || t === d),
    [true, true, false],
  );
});
