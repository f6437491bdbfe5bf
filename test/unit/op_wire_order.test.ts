/**
 * The collectives' wire codes: an operation's index in core/collective_ops.ts is its code in
 * negotiation messages and its slot in rr.stats(), so ranks of one job must agree on the list,
 * and a build that reorders it could not talk to one that does not. The list is pinned here
 * (append only), and the engine's registry must list its specs in the same order. The reduce ops'
 * codes are pinned the same way.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { kCollectiveOps } from '../../src/core/collective_ops.js';
import { kAllreduceOps, kReduceOps } from '../../src/core/types.js';
import { kSpecOps } from '../../src/engine/ops/registry.js';
import { decodeControl, encodeControl } from '../../src/engine/wire/codec.js';
import type { Request } from '../../src/engine/wire/messages.js';

const kPinned = [
  'allreduce',
  'allgather',
  'broadcast',
  'barrier',
  'reducescatter',
  'alltoall',
  'reduce',
  'gather',
  'scatter',
  'addProcessSet',
  'removeProcessSet',
  'join',
];

it('the operations keep their wire order (append only)', () => {
  assert.deepEqual([...kCollectiveOps], kPinned);
});

it("the registry lists one spec per operation, in the operations' order", () => {
  assert.deepEqual([...kSpecOps], kPinned);
});

it("a request's operation travels as its index in that order", () => {
  const request: Request = { name: 'x', op: 'barrier', dtype: 'uint8', shape: [0] };
  const bytes = encodeControl({ type: 'requests', requests: [request] });
  // type (1), set (4), count (4), name length (4) and 'x' (1), then the op code.
  assert.equal(bytes[14], kPinned.indexOf('barrier'));
  assert.deepEqual(decodeControl(bytes), { type: 'requests', requests: [request] });
});

it("the reduce ops keep their codes, and allreduce's 'adasum' comes after them as 8", () => {
  const reduceOps = ['sum', 'average', 'min', 'max', 'product', 'band', 'bor', 'bxor'];
  assert.deepEqual([...kReduceOps], reduceOps);
  assert.deepEqual([...kAllreduceOps], [...reduceOps, 'adasum']);
  // The one byte where a sum and an adasum request differ is the op's code.
  const encode = (reduceOp: 'sum' | 'adasum') =>
    encodeControl({ type: 'requests', requests: [{ name: 'g', op: 'allreduce', dtype: 'float32', shape: [2], reduceOp }] });
  const sum = encode('sum');
  const adasum = encode('adasum');
  const differ = [...sum.keys()].filter((i) => sum[i] !== adasum[i]);
  assert.deepEqual(
    differ.map((i) => [sum[i], adasum[i]]),
    [[0, 8]],
  );
});
