/** TensorQueue (engine/negotiation/tensor_queue.ts): entries by name; a name taken out keeps its key for its next call. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Entry } from '../../src/engine/negotiation/tensor_queue.js';
import { TensorQueue } from '../../src/engine/negotiation/tensor_queue.js';

const entry = (name: string): Entry => ({ id: 1, request: { op: 'allreduce', name } }) as unknown as Entry;

describe('TensorQueue', () => {
  it('holds an entry per name until taken, counting only queued ones', () => {
    const queue = new TensorQueue();
    const a = entry('a');
    queue.add(a);
    queue.add(entry('b'));
    assert.equal(queue.size, 2);
    assert.equal(queue.get('a'), a);
    assert.equal(queue.take('a'), a);
    assert.equal(queue.take('a'), undefined, 'taken already');
    assert.equal(queue.has('a'), false);
    assert.equal(queue.get('a'), undefined);
    assert.equal(queue.size, 1);
    const again = entry('a');
    queue.add(again);
    assert.equal(queue.size, 2, 'the same name queued again');
    queue.add(entry('a'));
    assert.equal(queue.size, 2, 'a name replaced counts once');
    assert.deepEqual(
      queue
        .drain()
        .map((e) => e.request.name)
        .sort(),
      ['a', 'b'],
    );
    assert.equal(queue.size, 0);
    assert.deepEqual(queue.drain(), []);
  });

  it('forgets the keys of names used once (unnamed calls) as they pile up, and keeps what is queued', () => {
    const queue = new TensorQueue();
    const kept = entry('kept');
    queue.add(kept);
    for (let i = 0; i < 10_000; i++) {
      queue.add(entry(`allreduce#${i}`));
      queue.take(`allreduce#${i}`);
    }
    const keys = (queue as unknown as { entries: Map<string, unknown> }).entries.size;
    assert.ok(keys <= 2 + 1024 + 1, `${keys} keys kept`);
    assert.equal(queue.size, 1);
    assert.equal(queue.take('kept'), kept);
  });
});
