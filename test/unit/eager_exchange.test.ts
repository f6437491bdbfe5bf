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
/** The first value of every rank's buffer handed to the reduction, or undefined when take refused. */
function take(eager: EagerExchange, id: number, round: number, own: Float32Array): number[] | undefined {
  let values: number[] | undefined;
  const outcome = eager.take(id, round, request, own, (buffers) => {
    values = buffers.map((b) => Number(b[0]));
  });
  assert.equal(outcome === 'reduced', values !== undefined);
  return values;
}

describe('EagerExchange', () => {
  it("takes each peer's buffer of the round being closed, not a later round's", () => {
    const eager = new EagerExchange(0, 3);
    eager.receive(1, 5, [{ id: 7, data: scalar(1) }]);
    eager.receive(2, 5, [{ id: 7, data: scalar(2) }]);
    // Rank 1 closed round 5 first and already reported its next submission for round 6.
    eager.receive(1, 6, [{ id: 7, data: scalar(10) }]);
    assert.deepEqual(take(eager, 7, 5, new Float32Array([0])), [0, 1, 2]);
    eager.receive(2, 6, [{ id: 7, data: scalar(20) }]);
    assert.deepEqual(take(eager, 7, 6, new Float32Array([100])), [100, 10, 20]);
  });

  it('uses the latest buffer a peer reported up to the round (a resubmission replaces a stale one)', () => {
    const eager = new EagerExchange(1, 2);
    eager.receive(0, 3, [{ id: 2, data: scalar(5) }]);
    eager.receive(0, 4, [{ id: 2, data: scalar(6) }]);
    assert.deepEqual(take(eager, 2, 4, new Float32Array([1])), [6, 1]);
  });

  it('refuses a missing or wrongly sized peer buffer', () => {
    const eager = new EagerExchange(0, 2);
    assert.equal(take(eager, 1, 0, new Float32Array([0])), undefined);
    eager.receive(1, 0, [{ id: 1, data: new Uint8Array(8) }]);
    assert.equal(take(eager, 1, 0, new Float32Array([0])), undefined);
  });

  it("reuses a reduced round's copy for the next message, holding only the new bytes", () => {
    const eager = new EagerExchange(0, 2);
    const message = scalar(3);
    eager.receive(1, 0, [{ id: 4, data: message }]);
    message[0] = 0xff; // the transport may reuse the message's bytes once receive returns
    let first: ArrayBufferLike | undefined;
    eager.take(4, 0, request, new Float32Array([1]), (buffers) => {
      first = buffers[1]?.buffer;
      assert.equal(buffers[1]?.[0], 3);
    });
    eager.receive(1, 1, [{ id: 4, data: scalar(8) }]);
    eager.take(4, 1, request, new Float32Array([1]), (buffers) => {
      assert.equal(buffers[1]?.buffer, first, 'the pooled copy');
      assert.equal(buffers[1]?.[0], 8);
    });
  });

  it('withholds every buffer of a report whose new eager buffers exceed the limit, and sends each one once', () => {
    const grads = (n: number) =>
      Array.from({ length: n }, (_, id) => ({
        id,
        request: { ...request, name: `g${id}`, shape: [1024] },
        buffer: new Float32Array(1024),
      }));
    /** What `exchange` sends with a report of every one of `entries` ready. */
    const report = (exchange: EagerExchange, entries: ReturnType<typeof grads>) =>
      exchange.outgoing(
        entries.map((g) => g.id),
        (id) => entries[id],
      );
    // 2 ranks: 64 KiB per report, 16 tensors of 4 KiB fit.
    const within = new EagerExchange(0, 2);
    const sixteen = grads(16);
    assert.deepEqual(
      report(within, sixteen).map((e) => e.data.byteLength),
      Array(16).fill(4096),
    );
    assert.deepEqual(report(within, sixteen), [], 'sent once per submission');
    const burst = new EagerExchange(0, 2);
    const seventeen = grads(17);
    assert.deepEqual(
      report(burst, seventeen).map((e) => [e.id, e.data.byteLength]),
      seventeen.map((g) => [g.id, 0]),
    );
    assert.deepEqual(report(burst, seventeen), [], 'withheld once per submission');
    // 3 ranks: half as much per report.
    assert.ok(report(new EagerExchange(0, 3), sixteen.slice(0, 9)).every((e) => e.data.byteLength === 0));
  });

  it('leaves an id to the algorithms when any rank withheld its buffer, on every rank alike', () => {
    // Rank 0 withheld (its report was a burst); rank 1 sent its buffer.
    const rank0 = new EagerExchange(0, 2);
    const ids = Array.from({ length: 17 }, (_, id) => id);
    const withheld = rank0.outgoing(ids, () => ({ request: { ...request, shape: [1024] }, buffer: new Float32Array(1024) }));
    assert.equal(withheld[3]?.data.byteLength, 0);
    rank0.receive(1, 2, [{ id: 3, data: scalar(1) }]);
    const rank1 = new EagerExchange(1, 2);
    rank1.receive(0, 2, [{ id: 3, data: new Uint8Array(0) }]);
    const never = () => assert.fail('reduced a withheld collective');
    assert.equal(rank0.take(3, 2, request, new Float32Array([0]), never), 'withheld');
    assert.equal(rank1.take(3, 2, request, new Float32Array([0]), never), 'withheld');
    // The next submission's buffers are not confused with the withheld one's.
    rank1.receive(0, 3, [{ id: 3, data: scalar(5) }]);
    assert.deepEqual(take(rank1, 3, 3, new Float32Array([2])), [5, 2]);
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
