/**
 * A stall fails the submissions that waited, not a later one: a rank that had not submitted a
 * stalled tensor, and submits it again before rank 0's TimeoutError reaches it, keeps its new
 * submission, which then runs with everyone's.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { allreduceRequest, startEngines, stopEngines } from '../helpers/engines.js';

const scalar = (value: number) => new Float32Array(new SharedArrayBuffer(4)).fill(value);

test("a stall's TimeoutError spares a rank's newer submission of the same name", async () => {
  const ranks = startEngines(3, { stallTimeoutMs: 300 });
  const [r0, r1, r2] = ranks as [(typeof ranks)[0], (typeof ranks)[0], (typeof ranks)[0]];
  // Rank 0's control messages to rank 2 can be held back, as a slow link would.
  const held: (() => void)[] = [];
  let holding = false;
  const send = r0.transport.sendControl.bind(r0.transport);
  r0.transport.sendControl = (peer, payload) => {
    if (!holding || peer !== 2) return send(peer, payload);
    return new Promise<void>((resolve, reject) => held.push(() => void send(peer, payload).then(resolve, reject)));
  };
  const request = allreduceRequest('x', 1);
  // The engines' timers do not keep a process alive (sockets do, and here there are none).
  const keepAlive = setInterval(() => {}, 50);
  try {
    for (let step = 0; step < 2; step++) {
      const done = await Promise.all(ranks.map((r, rank) => r.submit(request, scalar(rank + 1))));
      assert.deepEqual(
        done.map((m) => m.type),
        ['done', 'done', 'done'],
      );
    }
    holding = true;
    const lonely = await r1.submit(request, scalar(2));
    assert.equal(lonely.type, 'failed', 'rank 1 alone: its submission stalls');
    // Rank 2 submits again while rank 0's TimeoutError is still on its way to it.
    const buffer2 = scalar(3);
    const newer = r2.submit(request, buffer2);
    await new Promise((resolve) => setTimeout(resolve, 50));
    holding = false;
    for (const release of held.splice(0)) release();
    const buffer0 = scalar(1);
    const buffer1 = scalar(2);
    const rest = [r0.submit(request, buffer0), r1.submit(request, buffer1)];
    const results = await Promise.all([newer, ...rest]);
    assert.deepEqual(
      results.map((m) => m.type),
      ['done', 'done', 'done'],
      JSON.stringify(results),
    );
    for (const buffer of [buffer0, buffer1, buffer2]) assert.equal(buffer[0], 6);
  } finally {
    clearInterval(keepAlive);
    await stopEngines(ranks);
  }
});
