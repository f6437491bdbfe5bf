import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ProtocolError } from '../../src/core/errors.js';
import { decodeControl, encodeControl } from '../../src/engine/wire/codec.js';
import type { ControlMessage, Request } from '../../src/engine/wire/messages.js';

const samples: ControlMessage[] = [
  {
    type: 'requests',
    requests: [
      { name: 'dense1/kernel', op: 'allreduce', dtype: 'float32', shape: [784, 128], reduceOp: 'average' },
      { name: 'ünïcødé ✓', op: 'broadcast', dtype: 'int64', shape: [], root: 3 },
      { name: 'rows', op: 'allgather', dtype: 'uint16', shape: [2 ** 40, 3] },
      { name: 'into', op: 'allgather', dtype: 'float32', shape: [2, 3], outLength: 2 ** 33 },
      { name: 'empty', op: 'allgather', dtype: 'int8', shape: [0], outLength: 0 },
      { name: 'scaled', op: 'allreduce', dtype: 'float64', shape: [3], reduceOp: 'sum', prescale: 0.5, postscale: -2 },
      { name: 'fp16', op: 'allreduce', dtype: 'float16', shape: [4, 2], reduceOp: 'average', postscale: 0.5 },
      { name: 'adasum', op: 'allreduce', dtype: 'float32', shape: [9], reduceOp: 'adasum', postscale: 0.5 },
      { name: 'shard', op: 'reducescatter', dtype: 'float32', shape: [9, 2], reduceOp: 'bxor', postscale: 0.25 },
      { name: 'moe', op: 'alltoall', dtype: 'float32', shape: [6, 4], splits: [0, 6, 0] },
      { name: 'sum0', op: 'reduce', dtype: 'uint32', shape: [5], reduceOp: 'max', root: 2 },
      { name: 'eval', op: 'gather', dtype: 'float64', shape: [0, 3], root: 1, outLength: 12 },
      { name: 'eval2', op: 'gather', dtype: 'float64', shape: [4, 3], root: 0 },
      { name: 'batch', op: 'scatter', dtype: 'int16', shape: [7, 2], root: 0, splits: [3, 2, 2] },
      { name: 'batch', op: 'scatter', dtype: 'uint8', shape: [0], root: 0, splits: [] },
      { name: 'sync', op: 'barrier', dtype: 'uint8', shape: [0] },
    ],
  },
  {
    type: 'responses',
    afterRounds: 7,
    evict: [3, 0],
    responses: [
      {
        kind: 'execute',
        names: ['a', 'b'],
        request: { name: 'a', op: 'allgather', dtype: 'float64', shape: [5, 2] },
        counts: [0, 5, 7],
      },
      {
        kind: 'execute',
        names: ['w'],
        request: { name: 'w', op: 'broadcast', dtype: 'int16', shape: [3], root: 2, timeoutMs: 2 ** 31 - 1 },
        counts: [],
      },
      { kind: 'error', names: ['c'], errorKind: 'MismatchError', message: "Mismatched data types for tensor 'c'" },
      { kind: 'error', names: ['d'], errorKind: 'TimeoutError', message: "'d' timed out", ranks: [1, 3] },
      { kind: 'cached', ids: [4, 2] },
    ],
  },
  { type: 'responses', afterRounds: 0, evict: [], responses: [] },
  {
    type: 'responses',
    afterRounds: 3,
    evict: [],
    responses: [],
    settings: { fusionThresholdBytes: 4194304, burstHoldMs: 1, trial: 23, done: true, score: 1.5e8 },
  },
  { type: 'responses', set: 1023, afterRounds: 2, evict: [], responses: [{ kind: 'cached', ids: [1] }] },
  { type: 'ready', set: 5, round: 0, ids: [], eager: [] },
  {
    type: 'requests',
    set: 3,
    requests: [
      { name: 'addProcessSet#0', op: 'addProcessSet', dtype: 'uint8', shape: [0], id: 3, ranks: [0, 2, 5] },
      { name: 'removeProcessSet#0', op: 'removeProcessSet', dtype: 'uint8', shape: [0], id: 3 },
    ],
  },
  { type: 'p2p-offer', tag: 2 ** 31 - 1, sequence: 7, dtype: 'uint64', length: 2 ** 40 },
  { type: 'p2p-answer', sequence: 7, outcome: 'mismatch', message: 'Mismatched send/recv ✓' },
  { type: 'p2p-answer', sequence: 0, outcome: 'withdrawn', message: '' },
  { type: 'p2p-withdraw', sequence: 3, tag: 0 },
  { type: 'p2p-offer', set: 4, tag: 0, sequence: 0, dtype: 'int8', length: 0 },
  { type: 'p2p-withdraw', set: 1023, sequence: 2 ** 31 - 1, tag: 2 ** 32 - 1 },
  {
    type: 'ready',
    round: 2 ** 32 - 1,
    ids: [0, 7, 8, 100, 1023],
    eager: [
      { id: 7, data: new Uint8Array([1, 2, 3, 4]) },
      { id: 8, data: new Uint8Array(0) },
    ],
  },
  { type: 'ready', round: 0, ids: [], eager: [] },
  {
    type: 'ready-step',
    set: 2,
    round: 9,
    step: 3,
    urgent: true,
    ids: [1, 5, 64],
    decisions: 12,
    contributions: [
      { rank: 4, ids: [1, 5, 64, 70] },
      { rank: 5, ids: [] },
    ],
    eager: [
      { rank: 6, id: 5, data: new Uint8Array([9, 8, 7, 6]) },
      { rank: 6, id: 9, data: new Uint8Array(0) },
      { rank: 7, id: 2, data: new Uint8Array(0) },
      { rank: 7, id: 40, data: new Uint8Array(0) },
    ],
  },
  { type: 'ready-step', round: 0, step: 0, urgent: false, ids: [], decisions: 0, contributions: [], eager: [] },
  { type: 'requests', requests: [] },
  { type: 'shutdown' },
  { type: 'shutdown-ack' },
];

test('every control message survives an encode/decode round trip', () => {
  for (const message of samples) assert.deepEqual(decodeControl(encodeControl(message)), message);
});

test('truncated messages are rejected with ProtocolError, never read out of bounds', () => {
  for (const message of samples) {
    const bytes = encodeControl(message);
    for (let cut = 0; cut < bytes.length; cut++) {
      assert.throws(() => decodeControl(bytes.subarray(0, cut)), ProtocolError, `cut at ${cut} of ${message.type}`);
    }
  }
});

test('a ready report is a bit-vector: a hundred ready ids take a few bytes', () => {
  const ids = Array.from({ length: 100 }, (_, i) => i);
  const bytes = encodeControl({ type: 'ready', round: 1, ids, eager: [] });
  // Type, process set, round, the bit-vector's length and 13 bytes, no eager buffers, no withheld ones.
  assert.equal(bytes.length, 1 + 4 + 4 + 4 + 13 + 4 + 4);
  assert.deepEqual(decodeControl(bytes), { type: 'ready', round: 1, ids, eager: [] });
  // The same hundred withheld from the eager path (a step's burst): one more bit-vector.
  const eager = ids.map((id) => ({ id, data: new Uint8Array(0) }));
  const withheld = encodeControl({ type: 'ready', round: 1, ids, eager });
  assert.equal(withheld.length, bytes.length + 4 + 13);
  assert.deepEqual(decodeControl(withheld), { type: 'ready', round: 1, ids, eager });
});

test('trailing bytes, unknown codes and absurd counts are rejected', () => {
  const bytes = encodeControl(samples[0] as ControlMessage);
  assert.throws(() => decodeControl(new Uint8Array([...bytes, 0])), /trailing/);
  assert.throws(() => decodeControl(new Uint8Array([99])), /unknown message type/);
  // A request list (of set 0) claiming 2^32-1 requests in 9 bytes must not allocate for them.
  assert.throws(() => decodeControl(new Uint8Array([0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff])), /claims/);
});

test('random mutations of valid messages either decode or throw ProtocolError', () => {
  let seed = 12345;
  const random = () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x7fffffff;
  };
  let decoded = 0;
  for (let i = 0; i < 2000; i++) {
    const bytes = encodeControl(samples[i % samples.length] as ControlMessage).slice();
    const flips = 1 + Math.floor(random() * 3);
    for (let f = 0; f < flips && bytes.length > 0; f++) bytes[Math.floor(random() * bytes.length)] = Math.floor(random() * 256);
    try {
      decodeControl(bytes);
      decoded++;
    } catch (error) {
      assert.ok(error instanceof ProtocolError, `unexpected ${(error as Error).name}: ${(error as Error).message}`);
    }
  }
  assert.ok(decoded < 2000);
});

test('one writer serves every message: a failed encode and a large one leave the next intact', () => {
  const ready: ControlMessage = { type: 'ready', round: 3, ids: [0, 9], eager: [{ id: 9, data: new Uint8Array([1, 2, 3, 4]) }] };
  const before = encodeControl(ready);
  // An operation no spec knows throws halfway through its request, after bytes were written.
  const unknown = { name: 'x', op: 'nope', dtype: 'float32', shape: [1] } as unknown as Request;
  assert.throws(() => encodeControl({ type: 'requests', requests: [unknown] }));
  assert.deepEqual(encodeControl(ready), before, 'the next message starts from an empty writer');
  // A message past the writer's kept size grows it; the next ones are still exact.
  const large: ControlMessage = { type: 'ready', round: 4, ids: [1], eager: [{ id: 1, data: new Uint8Array(200_000).fill(7) }] };
  assert.deepEqual(decodeControl(encodeControl(large)), large);
  assert.deepEqual(encodeControl(ready), before);
  assert.deepEqual(decodeControl(before), ready);
});
