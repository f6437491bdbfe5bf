/**
 * The sync mailbox (engine/threads/sync_mailbox.ts): a browser caller blocked in a ...Sync call takes its
 * completion from it. What a completion carries (shape, counts, an output of any dtype, an
 * error), that only the call's own id is taken and only once, growth for large outputs (seen from
 * another thread too), the refusal of an output past the mailbox's size, and the stop that ends
 * a wait.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Worker } from 'node:worker_threads';
import { Float16Bits } from '../../src/core/float16.js';
import { createSyncMailbox, SyncMailboxReader, SyncMailboxWriter } from '../../src/engine/threads/sync_mailbox.js';

function pair(maxBytes?: number) {
  const buffer = createSyncMailbox(maxBytes);
  return { buffer, writer: new SyncMailboxWriter(buffer), reader: new SyncMailboxReader(buffer) };
}

describe('sync mailbox', () => {
  it('carries a completion without output: shape and counts', () => {
    const { writer, reader } = pair();
    writer.write({ type: 'done', id: 7, shape: [3, 2], counts: [1, 2] });
    assert.deepEqual(reader.take(7), { type: 'done', id: 7, shape: [3, 2], counts: [1, 2] });
    assert.equal(reader.take(7), undefined, 'taken once');
  });

  it('carries an output the engine allocated, as a copy in shared memory of the same class', () => {
    const { writer, reader } = pair();
    for (const output of [
      Float64Array.from([1.5, -0, Number.NaN]),
      BigInt64Array.from([-(2n ** 63n), 5n]),
      Uint8Array.from([1, 2, 3]),
      new Float16Bits([0x3c00, 0xfc00]),
    ]) {
      writer.write({ type: 'done', id: 1, output, shape: [output.length] });
      const taken = reader.take(1);
      assert.ok(taken?.type === 'done' && taken.output !== undefined);
      assert.equal(taken.output.constructor, output.constructor);
      assert.ok(taken.output.buffer instanceof SharedArrayBuffer);
      assert.notEqual(taken.output.buffer, output.buffer);
      assert.deepEqual([...(taken.output as ArrayLike<unknown> as unknown[])], [...(output as ArrayLike<unknown> as unknown[])]);
      assert.deepEqual(taken.shape, [output.length]);
    }
  });

  it('carries a failure with its error record', () => {
    const { writer, reader } = pair();
    writer.write({ type: 'failed', id: 3, error: { kind: 'PeerFailureError', message: 'rank 1 is gone', peerRank: 1 } });
    assert.deepEqual(reader.take(3), {
      type: 'failed',
      id: 3,
      error: { kind: 'PeerFailureError', message: 'rank 1 is gone', peerRank: 1 },
    });
  });

  it("is not taken by another call's id (a call its caller gave up on), and the next write replaces it", () => {
    const { writer, reader } = pair();
    writer.write({ type: 'done', id: 4, shape: [1] });
    assert.equal(reader.take(5), undefined);
    writer.write({ type: 'done', id: 5, shape: [2] });
    assert.deepEqual(reader.take(5), { type: 'done', id: 5, shape: [2] });
  });

  it('grows for a large output, and refuses one past its largest size, saying so', () => {
    const { buffer, writer, reader } = pair(1 << 20);
    const large = Float32Array.from({ length: 100_000 }, (_, i) => i);
    writer.write({ type: 'done', id: 1, output: large });
    assert.ok(buffer.byteLength >= large.byteLength);
    const taken = reader.take(1);
    assert.ok(taken?.type === 'done');
    assert.deepEqual(taken.output, large);
    writer.write({ type: 'done', id: 2, output: new Float64Array(1 << 18) });
    const refused = reader.take(2);
    assert.ok(refused?.type === 'failed');
    assert.equal(refused.error.kind, 'RingReduceError');
    assert.match(
      refused.error.message,
      /^call 2: its result of \d+ bytes is larger than a \.\.\.Sync call can take in a browser \(1048576 bytes\): use the async call$/,
    );
  });

  it("says 'closed' once the engine has stopped, unless the call's completion is there", () => {
    const { writer, reader } = pair();
    writer.write({ type: 'done', id: 1 });
    writer.stop();
    assert.deepEqual(reader.take(1), { type: 'done', id: 1 });
    assert.deepEqual(reader.take(2), { type: 'closed' });
  });

  it('is read by another thread that had it before the writer grew it', async () => {
    const buffer = createSyncMailbox();
    const signal = new Int32Array(new SharedArrayBuffer(4));
    const code = `
      const { parentPort, workerData } = require('node:worker_threads');
      import(workerData.module).then(({ SyncMailboxReader }) => {
        const reader = new SyncMailboxReader(workerData.buffer);
        parentPort.postMessage('waiting');
        Atomics.wait(workerData.signal, 0, 0, 10000);
        const taken = reader.take(9);
        parentPort.postMessage({ length: taken.output.length, last: taken.output[taken.output.length - 1], shape: taken.shape });
      });`;
    const module = new URL('../../src/engine/threads/sync_mailbox.js', import.meta.url).href;
    const worker = new Worker(code, { eval: true, workerData: { buffer, signal, module } });
    const seen = new Promise((resolve, reject) => {
      worker.on('message', (message) => {
        if (message !== 'waiting') resolve(message);
      });
      worker.once('error', reject);
    });
    await new Promise((resolve) => worker.once('message', resolve));
    const output = Int32Array.from({ length: 300_000 }, (_, i) => i * 3);
    const before = buffer.byteLength;
    new SyncMailboxWriter(buffer).write({ type: 'done', id: 9, output, shape: [output.length] });
    assert.ok(buffer.byteLength > before, 'it grew');
    Atomics.store(signal, 0, 1);
    Atomics.notify(signal, 0);
    const result = await seen;
    await worker.terminate();
    assert.deepEqual(result, { length: 300_000, last: 299_999 * 3, shape: [300_000] });
  });
});
