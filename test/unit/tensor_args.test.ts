import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  checkOptions,
  parseGatherOut,
  parseName,
  parseOut,
  parseReduceOp,
  parseRoot,
  parseSplits,
  parseTensor,
} from '../../src/api/tensor_args.js';
import { InvalidArgumentError } from '../../src/core/errors.js';

test('typed arrays are 1-D tensors of their dtype', () => {
  const t = parseTensor(new BigInt64Array(3));
  assert.deepEqual([t.dtype, t.shape, t.shaped], ['int64', [3], false]);
  assert.equal(parseTensor(new Uint8Array(2)).dtype, 'uint8');
});

test('{ data, shape } is checked against its element count', () => {
  const t = parseTensor({ data: new Float32Array(6), shape: [2, 3] });
  assert.deepEqual([t.dtype, t.shape, t.shaped], ['float32', [2, 3], true]);
  assert.throws(
    () => parseTensor({ data: new Float32Array(5), shape: [2, 3] }),
    /shape \[2, 3\] holds 6 elements but tensor.data has 5/,
  );
  assert.throws(
    () => parseTensor({ data: new Float32Array(1), shape: [1.5] }),
    /tensor.shape must be an array of non-negative integers/,
  );
});

test('what is not a supported typed array is named', () => {
  assert.throws(() => parseTensor([1, 2, 3]), /tensor must be a typed array or \{ data, shape \}, got Array/);
  assert.throws(() => parseTensor(new Uint8ClampedArray(2)), /Uint8ClampedArray clamps/);
  assert.throws(() => parseTensor(new DataView(new ArrayBuffer(4))), InvalidArgumentError);
});

test('options: names, reduce ops, roots, unknown keys', () => {
  assert.equal(parseName(undefined), undefined);
  assert.throws(() => parseName(''), /option 'name'/);
  assert.equal(parseReduceOp(undefined, 'int32'), 'sum');
  assert.throws(() => parseReduceOp('average', 'int32'), /use op 'sum'/);
  assert.throws(() => parseReduceOp('mean', 'float32'), /option 'op' must be one of/);
  assert.equal(parseRoot(2, 3), 2);
  assert.throws(() => parseRoot(3, 3), /option 'root' must be an integer rank in \[0, 2\], got 3/);
  assert.throws(() => checkOptions({ nmae: 'x' }, ['name']), /unknown option 'nmae'/);
});

test("option 'out': shared memory of the tensor's dtype; allreduce's has the tensor's length, allgather's any", () => {
  const t = parseTensor(new Float32Array(4));
  const shared = (n: number) => new Float32Array(new SharedArrayBuffer(4 * n));
  assert.equal(parseOut(undefined, t), undefined);
  const out = shared(4);
  assert.equal(parseOut(out, t), out);
  assert.throws(() => parseOut(shared(5), t), /option 'out' has 5 elements but the tensor has 4/);
  const gathered = shared(12);
  assert.equal(parseGatherOut(gathered, t), gathered, 'the gathered length is checked in negotiation');
  for (const parse of [parseOut, parseGatherOut]) {
    assert.throws(() => parse(new Float32Array(4), t), /option 'out' must be backed by a SharedArrayBuffer/);
    assert.throws(() => parse(new Int32Array(new SharedArrayBuffer(16)), t), /option 'out' must be a float32 typed array/);
    assert.throws(() => parse([1, 2, 3, 4], t), /option 'out' must be a float32 typed array/);
  }
});

test("option 'splits': an array or any integer typed array; floats, fractions, negatives and huge bigints are named", () => {
  const none = () => assert.fail('the fallback is for unset splits only');
  assert.deepEqual(parseSplits([1, 0, 2], 3, 3, none), [1, 0, 2]);
  for (const splits of [
    Int8Array.of(1, 0, 2),
    Uint8Array.of(1, 0, 2),
    Int16Array.of(1, 0, 2),
    Uint16Array.of(1, 0, 2),
    Int32Array.of(1, 0, 2),
    Uint32Array.of(1, 0, 2),
    BigInt64Array.of(1n, 0n, 2n),
    BigUint64Array.of(1n, 0n, 2n),
  ]) {
    assert.deepEqual(parseSplits(splits, 3, 3, none), [1, 0, 2], splits.constructor.name);
  }
  assert.deepEqual(
    parseSplits(undefined, 4, 2, () => [2, 2]),
    [2, 2],
  );
  const refused = (splits: unknown, got: string) =>
    assert.throws(
      () => parseSplits(splits, 3, 3, none),
      (e) =>
        e instanceof InvalidArgumentError &&
        e.message ===
          `option 'splits' must be an array or integer typed array of 3 non-negative integers (rows for each rank), got ${got}`,
    );
  refused(Int32Array.of(2, -1, 2), 'Int32Array [2, -1, 2]');
  refused(Float32Array.of(1, 0, 2), 'Float32Array [1, 0, 2]');
  refused(Float64Array.of(1, 0.5, 1.5), 'Float64Array [1, 0.5, 1.5]');
  refused([1, 0.5, 1.5], '[1,0.5,1.5]');
  refused(BigInt64Array.of(2n ** 60n, 0n, 0n), `BigInt64Array [${2n ** 60n}, 0, 0]`);
  refused(Int32Array.of(1, 2), 'Int32Array [1, 2]');
  refused(new Uint8ClampedArray(3), 'Uint8ClampedArray [0, 0, 0]');
  refused(new DataView(new ArrayBuffer(3)), '{}');
  refused({ 0: 1, 1: 1, 2: 1 }, '{"0":1,"1":1,"2":1}');
  assert.throws(() => parseSplits(Uint16Array.of(1, 1, 2), 3, 3, none), /option 'splits' adds up to 4 rows but the tensor has 3/);
});
