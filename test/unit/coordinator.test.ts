import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Logger } from '../../src/core/logger.js';
import { Coordinator } from '../../src/engine/negotiation/coordinator.js';
import type { Request, Response } from '../../src/engine/wire/messages.js';

const req = (name: string, dtype: Request['dtype'] = 'float32'): Request => ({
  name,
  op: 'allreduce',
  dtype,
  shape: [4],
  reduceOp: 'sum',
});

function setup(size: number, stallTimeoutMs = 0) {
  const published: Response[][] = [];
  let shutdowns = 0;
  const coordinator = new Coordinator({
    size,
    stallTimeoutMs,
    publish: (responses) => published.push(responses),
    publishShutdown: () => shutdowns++,
    logger: new Logger('[test]', 'error', () => {}),
  });
  return { coordinator, published, shutdowns: () => shutdowns };
}

test('a name is released only once every rank reported it, in the order names became ready', () => {
  const { coordinator, published } = setup(3);
  coordinator.onRequests(0, [req('a'), req('b')]);
  coordinator.onRequests(1, [req('b'), req('a')]);
  assert.equal(published.length, 0);
  coordinator.onRequests(2, [req('b')]);
  assert.deepEqual(
    published.map((list) => list.map((r) => r.names[0])),
    [['b']],
  );
  coordinator.onRequests(2, [req('a')]);
  assert.deepEqual(
    published.map((list) => list.map((r) => r.names[0])),
    [['b'], ['a']],
  );
  assert.deepEqual(coordinator.waitingNames(), []);
  coordinator.close();
});

test('a mismatch is published as an error response and the name is forgotten', () => {
  const { coordinator, published } = setup(2);
  coordinator.onRequests(0, [req('a')]);
  coordinator.onRequests(1, [req('a', 'int32')]);
  assert.equal(published[0]?.[0]?.kind, 'error');
  coordinator.onRequests(0, [req('a')]);
  coordinator.onRequests(1, [req('a')]);
  assert.equal(published[1]?.[0]?.kind, 'execute');
  coordinator.close();
});

test('a rank submitting the same name twice gets an error naming it', () => {
  const { coordinator, published } = setup(2);
  coordinator.onRequests(1, [req('a')]);
  coordinator.onRequests(1, [req('a')]);
  const response = published[0]?.[0];
  assert.equal(response?.kind, 'error');
  assert.match(response?.kind === 'error' ? response.message : '', /Rank 1 submitted tensor 'a' twice/);
  coordinator.close();
});

test('stalled names time out with the missing ranks named', async () => {
  const { coordinator, published } = setup(3, 50);
  coordinator.onRequests(0, [req('late')]);
  coordinator.onRequests(2, [req('late')]);
  await new Promise((resolve) => setTimeout(resolve, 200));
  const response = published[0]?.[0];
  assert.equal(response?.kind, 'error');
  if (response?.kind === 'error') {
    assert.equal(response.errorKind, 'TimeoutError');
    assert.match(response.message, /'late' timed out .* ranks 1 did not submit it \(ranks 0, 2 did\)/);
    assert.deepEqual(response.ranks, [0, 2], 'it fails only the submissions that waited');
  }
  coordinator.close();
});

test("a name's own deadline (option 'timeoutMs', the smallest of its requests) replaces the stall timeout, also with none", async () => {
  const { coordinator, published } = setup(3, 0);
  const started = performance.now();
  coordinator.onRequests(0, [{ ...req('soon'), timeoutMs: 200 }, req('never')]);
  coordinator.onRequests(2, [{ ...req('soon'), timeoutMs: 40 }]);
  while (published.length === 0 && performance.now() - started < 2000) await new Promise((resolve) => setTimeout(resolve, 10));
  const took = performance.now() - started;
  const response = published[0]?.[0];
  assert.ok(took >= 39 && took < 190, `failed after ${took.toFixed(0)} ms`);
  assert.deepEqual(response, {
    kind: 'error',
    names: ['soon'],
    errorKind: 'TimeoutError',
    message: "Collective 'soon' timed out after 40 ms in negotiation: ranks 1 did not submit it (ranks 0, 2 did).",
    ranks: [0, 2],
  });
  assert.deepEqual(coordinator.waitingNames(), ['never'], 'a name without a deadline waits on (stall timeout 0)');
  coordinator.close();
});

test('shutdown is acknowledged once every rank asked', () => {
  const { coordinator, shutdowns } = setup(3);
  coordinator.onShutdown(0);
  coordinator.onShutdown(2);
  assert.equal(shutdowns(), 0);
  coordinator.onShutdown(1);
  assert.equal(shutdowns(), 1);
  coordinator.close();
});

test('a name that waits for a rank which has shut down fails at once, on the ranks that submitted it', () => {
  const { coordinator, published, shutdowns } = setup(3);
  coordinator.onRequests(2, [req('before')]);
  coordinator.onRequests(0, [req('waiting')]);
  coordinator.onShutdown(2);
  const failed = published[0]?.[0];
  assert.equal(failed?.kind, 'error');
  if (failed?.kind === 'error') {
    assert.equal(failed.errorKind, 'ShutdownError');
    assert.match(failed.message, /^rank 2 has shut down .*: 'waiting' cannot complete without it$/);
    assert.deepEqual(failed.ranks, [0]);
  }
  // Submitted after the shutdown: failed as it arrives, with the same message on every rank.
  coordinator.onRequests(1, [req('waiting')]);
  const later = published[1]?.[0];
  assert.equal(later?.kind === 'error' ? later.message : undefined, failed?.kind === 'error' ? failed.message : '');
  assert.deepEqual(later?.kind === 'error' ? later.ranks : undefined, [1]);
  // A name the rank submitted before it left still runs.
  coordinator.onRequests(0, [req('before')]);
  coordinator.onRequests(1, [req('before')]);
  assert.equal(published.at(-1)?.[0]?.kind, 'execute');
  coordinator.onShutdown(0);
  coordinator.onShutdown(1);
  assert.equal(shutdowns(), 1);
  assert.deepEqual(coordinator.waitingNames(), []);
  coordinator.close();
});
