/**
 * Eager exchange: a peer's buffer belongs to the round it was reported in, so a fast peer's
 * next submission (reported for the next round) can never stand in for its current one on a
 * rank that has not closed the current round yet; and through real engines, 4 ranks running
 * scalar allreduces back to back get every step's own sum.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { EagerExchange } from '../../src/engine/ready/eager_exchange.js';
import type { Request } from '../../src/engine/wire/messages.js';
import { startWorld, stopWorld } from '../helpers/world.js';

const request: Request = { name: 'loss', op: 'allreduce', dtype: 'float32', shape: [1], reduceOp: 'sum' };
const scalar = (v: number) => new Uint8Array(new Float32Array([v]).buffer);
const values = (buffers: readonly ArrayLike<number | bigint>[] | undefined) => buffers?.map((b) => Number(b[0]));

describe('EagerExchange', () => {
  it("takes each peer's buffer of the round being closed, not a later round's", () => {
    const eager = new EagerExchange(0, 3);
    eager.receive(1, 5, [{ id: 7, data: scalar(1) }]);
    eager.receive(2, 5, [{ id: 7, data: scalar(2) }]);
    // Rank 1 closed round 5 first and already reported its next submission for round 6.
    eager.receive(1, 6, [{ id: 7, data: scalar(10) }]);
    assert.deepEqual(values(eager.take(7, 5, request, new Float32Array([0]))), [0, 1, 2]);
    eager.receive(2, 6, [{ id: 7, data: scalar(20) }]);
    assert.deepEqual(values(eager.take(7, 6, request, new Float32Array([100]))), [100, 10, 20]);
  });

  it('uses the latest buffer a peer reported up to the round (a resubmission replaces a stale one)', () => {
    const eager = new EagerExchange(1, 2);
    eager.receive(0, 3, [{ id: 2, data: scalar(5) }]);
    eager.receive(0, 4, [{ id: 2, data: scalar(6) }]);
    assert.deepEqual(values(eager.take(2, 4, request, new Float32Array([1]))), [6, 1]);
  });

  it('reports a missing or wrongly sized peer buffer as undefined', () => {
    const eager = new EagerExchange(0, 2);
    assert.equal(eager.take(1, 0, request, new Float32Array([0])), undefined);
    eager.receive(1, 0, [{ id: 1, data: new Uint8Array(8) }]);
    assert.equal(eager.take(1, 0, request, new Float32Array([0])), undefined);
  });
});

describe('eager allreduces through 4 ranks', () => {
  it('every step of a loop of back-to-back scalar allreduces gets its own sum', async () => {
    const world = await startWorld(4);
    try {
      const steps = 300;
      const sums = await Promise.all(
        world.map(async (rr) => {
          const seen: number[] = [];
          for (let step = 0; step < steps; step++) {
            const out = await rr.allreduce(new Float32Array([rr.rank() + 1 + step]), { name: 'loss' });
            seen.push(out[0] as number);
          }
          return seen;
        }),
      );
      const expected = Array.from({ length: steps }, (_, step) => 10 + 4 * step);
      for (const [rank, seen] of sums.entries()) assert.deepEqual(seen, expected, `rank ${rank}`);
    } finally {
      await stopWorld(world);
    }
  });
});
