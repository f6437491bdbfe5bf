import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BufferPool, kMinPoolBytes } from '../../src/core/buffer_pool.js';
import { RingReduceError } from '../../src/core/errors.js';

describe('BufferPool', () => {
  it('hands back a released buffer instead of allocating, picking the smallest that fits', () => {
    const pool = new BufferPool();
    const small = pool.acquire(100);
    const large = pool.acquire(50_000);
    assert.equal(small.byteLength, kMinPoolBytes);
    assert.equal(large.byteLength, 65_536);
    pool.release(large);
    pool.release(small);
    assert.equal(pool.retainedBytes, kMinPoolBytes + 65_536);
    assert.equal(pool.acquire(10), small);
    assert.equal(pool.acquire(kMinPoolBytes + 1), large);
    assert.equal(pool.allocations, 2);
    assert.equal(pool.retainedBytes, 0);
  });

  it('never gives one buffer to two holders', () => {
    const pool = new BufferPool();
    const a = pool.acquire(10);
    const b = pool.acquire(10);
    assert.notEqual(a, b);
  });

  it('lets buffers beyond its retention limit go', () => {
    const pool = new BufferPool(kMinPoolBytes);
    const a = pool.acquire(1);
    const b = pool.acquire(1);
    pool.release(a);
    pool.release(b);
    assert.equal(pool.retainedBytes, kMinPoolBytes);
    pool.clear();
    assert.equal(pool.retainedBytes, 0);
    assert.notEqual(pool.acquire(1), a);
  });

  it('refuses a buffer it did not hand out, or one released twice', () => {
    const pool = new BufferPool();
    assert.throws(() => pool.release(new ArrayBuffer(8)), RingReduceError);
    const a = pool.acquire(8);
    pool.release(a);
    assert.throws(() => pool.release(a), RingReduceError);
  });

  it('allocates with the given function: shared memory for the caller thread', () => {
    const pool = new BufferPool<SharedArrayBuffer>(1 << 20, (bytes) => new SharedArrayBuffer(bytes));
    const a = pool.acquire(5000);
    assert.ok(a instanceof SharedArrayBuffer);
    assert.equal(a.byteLength, 8192);
    pool.release(a);
    assert.equal(pool.acquire(6000), a);
    assert.equal(pool.allocations, 1);
  });
});
