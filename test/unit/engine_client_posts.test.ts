/**
 * How often the caller's thread wakes the engine (EngineClient's bursts): every thread message
 * is a wake-up of the engine, so a grouped call is one message, a training step after a step is
 * one message, and a lone call goes at once. A real engine thread, one rank.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { platform } from '#platform';
import { EngineClient } from '../../src/api/engine_client.js';
import { RingReduce } from '../../src/api/runtime.js';
import { resolveConfig } from '../../src/core/config.js';
import type { Platform } from '../../src/platform/platform.js';

describe('EngineClient: messages to the engine per burst', () => {
  let rr: RingReduce;
  let posts = 0;

  before(async () => {
    // The real platform, its engine thread's post counted.
    const counting: Platform = Object.create(platform, {
      startEngine: {
        value: (...args: Parameters<Platform['startEngine']>) => {
          const thread = platform.startEngine(...args);
          const post = thread.post.bind(thread);
          thread.post = (message) => {
            if (message.type === 'enqueue' || message.type === 'ring') posts++;
            post(message);
          };
          return thread;
        },
      },
    });
    const config = resolveConfig({}, {});
    rr = RingReduce.withEngine(config, await EngineClient.start(config, counting));
  });

  after(() => rr.shutdown());

  /** Messages posted while `body` runs, and its result. */
  async function counted<T>(body: () => Promise<T>): Promise<{ messages: number; result: T }> {
    const before = posts;
    const result = await body();
    return { messages: posts - before, result };
  }

  const tensors = Array.from({ length: 10 }, (_, i) => Float32Array.of(i, -i));

  it('a grouped call is one message, from its first call on', async () => {
    const outs = tensors.map(() => new Float32Array(new SharedArrayBuffer(8)));
    for (let step = 0; step < 3; step++) {
      const { messages, result } = await counted(() => rr.groupedAllreduce(tensors, { name: 'group', outs }));
      assert.equal(messages, 1, `step ${step}`);
      assert.deepEqual(
        result.map((r) => [...r]),
        tensors.map((t) => [...t]),
      );
    }
  });

  it('a grouped call of one tensor is one message, posted before the call returns, cached or not', async () => {
    const outs = [new Float32Array(new SharedArrayBuffer(4))];
    for (let step = 0; step < 3; step++) {
      const before = posts;
      const pending = rr.groupedAllreduce([Float32Array.of(step)], { name: 'group-of-one', outs });
      assert.equal(posts - before, 1, `step ${step}`);
      assert.deepEqual(
        (await pending).map((r) => [...r]),
        [[step]],
      );
    }
  });

  it('a burst of named calls: the first at once and the rest together; after a burst, all together', async () => {
    const step = () => Promise.all(tensors.map((t, i) => rr.allreduce(t, { name: `named${i}` })));
    await rr.allreduce(Float32Array.of(1), { name: 'lone' });
    const first = await counted(step);
    assert.equal(first.messages, 2);
    const second = await counted(step);
    assert.equal(second.messages, 1);
    assert.deepEqual(
      second.result.map((r) => [...r]),
      tensors.map((t) => [...t]),
    );
    // The lone call after a step is held to its task's end, then posted: one message.
    const lone = await counted(() => rr.allreduce(Float32Array.of(2), { name: 'lone' }));
    assert.deepEqual([lone.messages, [...lone.result]], [1, [2]]);
    // And a lone call after a lone call goes at once: one message.
    const again = await counted(() => rr.allreduce(Float32Array.of(3), { name: 'lone' }));
    assert.deepEqual([again.messages, [...again.result]], [1, [3]]);
  });

  it('a ...Sync call in a held burst posts the burst with itself before it blocks', async () => {
    const step = () => Promise.all(tensors.map((t, i) => rr.allreduce(t, { name: `named${i}` })));
    await step();
    const before = posts;
    const pending = step(); // after a step: held until its task ends
    assert.equal(posts, before);
    const result = rr.allreduceSync(Float32Array.of(5), { name: 'sync' });
    assert.deepEqual([posts - before, [...result]], [1, [5]]);
    assert.deepEqual(
      (await pending).map((r) => [...r]),
      tensors.map((t) => [...t]),
    );
  });
});
