import assert from 'node:assert/strict';
import { test } from 'node:test';
import { negotiate } from '../../src/engine/negotiation/validation.js';
import type { Request } from '../../src/engine/wire/messages.js';

const base: Request = { name: 'g', op: 'allreduce', dtype: 'float32', shape: [2, 3], reduceOp: 'sum' };

/** Rank `at`'s request with `changes` (which may make it another op's: a deliberate mismatch). */
function withRank(changes: Record<string, unknown>, at = 2, size = 4): Request[] {
  return Array.from({ length: size }, (_, r) => (r === at ? ({ ...base, ...changes } as Request) : { ...base }));
}

test('agreeing requests give one execute response', () => {
  const response = negotiate('g', withRank({}));
  assert.deepEqual(response, { kind: 'execute', names: ['g'], request: base, counts: [] });
});

test('each kind of disagreement names the tensor, both ranks and both values', () => {
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ dtype: 'int32' }, /Mismatched data types for tensor 'g': rank 0 has float32, rank 2 has int32/],
    [{ shape: [3, 2] }, /Mismatched shapes for tensor 'g': rank 0 has \[2, 3\], rank 2 has \[3, 2\]/],
    [{ op: 'broadcast' }, /Mismatched collective operations .* rank 2 has broadcast/],
    [{ reduceOp: 'max' }, /Mismatched reduce ops .* rank 0 has sum, rank 2 has max/],
  ];
  for (const [changes, pattern] of cases) {
    const response = negotiate('g', withRank(changes));
    assert.equal(response.kind, 'error');
    if (response.kind === 'error') {
      assert.equal(response.errorKind, 'MismatchError');
      assert.match(response.message, pattern);
    }
  }
});

test('broadcast roots must agree', () => {
  const requests: Request[] = [0, 1, 2, 3].map((i) => ({
    name: 'g',
    op: 'broadcast',
    dtype: 'float32',
    shape: [2, 3],
    root: i === 2 ? 1 : 0,
  }));
  const response = negotiate('g', requests);
  assert.equal(response.kind, 'error');
  assert.match(response.kind === 'error' ? response.message : '', /broadcast roots .* rank 0 has root 0, rank 2 has root 1/);
});

test('allgather: first dimensions may differ, the rest may not', () => {
  const gather = (shapes: number[][]) =>
    negotiate(
      'x',
      shapes.map((shape): Request => ({ name: 'x', op: 'allgather', dtype: 'float32', shape })),
    );
  const ok = gather([
    [1, 4],
    [0, 4],
    [7, 4],
  ]);
  assert.equal(ok.kind, 'execute');
  assert.deepEqual(ok.kind === 'execute' ? ok.counts : [], [1, 0, 7]);
  const bad = gather([
    [1, 4],
    [1, 5],
  ]);
  assert.match(
    bad.kind === 'error' ? bad.message : '',
    /allgather dimensions after the first .* rank 0 has \[4\], rank 1 has \[5\]/,
  );
  const badRank = gather([[1, 4], [4]]);
  assert.match(badRank.kind === 'error' ? badRank.message : '', /tensor ranks/);
});
