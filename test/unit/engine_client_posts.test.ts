/**
 * How often the caller's thread wakes the engine (EngineClient's bursts): every thread message
 * is a wake-up of the engine, so a grouped call is one message; a burst of named calls posts its
 * first call at once and the rest together. A real engine thread, one rank.
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
  /** The hand-off rings' words (engine/threads/hand_off.ts): word 0 counts the calls written to the ring. */
  let ring: Int32Array;

  before(async () => {
    // The real platform, its engine thread's post counted.
    const counting: Platform = Object.create(platform, {
      startEngine: {
        value: (...args: Parameters<Platform['startEngine']>) => {
          ring = new Int32Array(args[0].handOff);
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

  it('a repeated grouped call is one entry of the hand-off ring; a member on other memory binds the group anew', async () => {
    const inputs = tensors.map((t) => t.slice());
    const outs = tensors.map(() => new Float32Array(new SharedArrayBuffer(8)));
    const step = async (value: number) => {
      for (const input of inputs) input.fill(value);
      const before = { posts, entries: Atomics.load(ring, 0) };
      const result = await rr.groupedAllreduce(inputs, { name: 'bound-group', outs });
      assert.deepEqual(
        result.map((r) => [...r]),
        inputs.map(() => [value, value]),
        `step ${value}`,
      );
      assert.deepEqual(result, outs, `step ${value}: the results are the outs`);
      return { messages: posts - before.posts, entries: Atomics.load(ring, 0) - before.entries };
    };
    assert.deepEqual(await step(1), { messages: 1, entries: 0 }, 'the first call: the members as a message');
    for (let value = 2; value < 5; value++) assert.deepEqual(await step(value), { messages: 1, entries: 1 }, `step ${value}`);
    outs[3] = new Float32Array(new SharedArrayBuffer(8));
    assert.deepEqual(await step(5), { messages: 1, entries: 9 }, 'member 3 anew: the others through the ring one by one');
    for (let value = 6; value < 8; value++) assert.deepEqual(await step(value), { messages: 1, entries: 1 }, `step ${value}`);
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

  it('a burst of named calls: the first at once (a caller that computes after it has it running), the rest together', async () => {
    const step = () => Promise.all(tensors.map((t, i) => rr.allreduce(t, { name: `named${i}` })));
    for (let round = 0; round < 2; round++) {
      const before = posts;
      const pending = step();
      assert.equal(posts - before, 1, `round ${round}: the first call, before the task ends`);
      const results = await pending;
      assert.equal(posts - before, 2, `round ${round}: the rest, at the task's end`);
      assert.deepEqual(
        results.map((r) => [...r]),
        tensors.map((t) => [...t]),
      );
    }
    // A lone call after a step goes at once too.
    const before = posts;
    const lone = rr.allreduce(Float32Array.of(2), { name: 'lone' });
    assert.equal(posts - before, 1);
    assert.deepEqual([...(await lone)], [2]);
  });

  it('a ...Sync call in a burst posts the burst with itself before it blocks', async () => {
    const before = posts;
    const pending = Promise.all(tensors.map((t, i) => rr.allreduce(t, { name: `named${i}` })));
    const result = rr.allreduceSync(Float32Array.of(5), { name: 'sync' });
    assert.deepEqual([posts - before, [...result]], [2, [5]]);
    assert.deepEqual(
      (await pending).map((r) => [...r]),
      tensors.map((t) => [...t]),
    );
  });
});
