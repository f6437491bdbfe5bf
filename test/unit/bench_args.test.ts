import assert from 'node:assert/strict';
import { describe, it, test } from 'node:test';
import { parseBenchArgs } from '../../bench/args.js';
import { autoIterations, autoWarmup } from '../../bench/spec.js';

describe('bench arguments: --compression', () => {
  it("defaults to 'none' and takes 'fp16' for the ops that have the option", () => {
    assert.equal(parseBenchArgs([]).compression, 'none');
    const args = parseBenchArgs(['--op', 'allreduce,allgather,reducescatter', '--compression', 'fp16']);
    assert.equal(args.compression, 'fp16');
  });

  it('refuses an unknown compression, another dtype, another op, and --in-place', () => {
    assert.throws(() => parseBenchArgs(['--op', 'allreduce', '--compression', 'fp8']), /--compression must be one of none, fp16/);
    assert.throws(
      () => parseBenchArgs(['--op', 'allreduce', '--compression', 'fp16', '--dtype', 'float64']),
      /needs --dtype float32, got float64/,
    );
    assert.throws(() => parseBenchArgs(['--op', 'allreduce,broadcast', '--compression', 'fp16']), /not broadcast/);
    assert.throws(() => parseBenchArgs(['--op', 'allreduce', '--compression', 'fp16', '--in-place']), /no in-place form/);
  });
});

describe('bench arguments: --step', () => {
  it('times the training step when --op is not given, or when asked', () => {
    assert.equal(parseBenchArgs([]).step, true);
    assert.equal(parseBenchArgs(['--op', 'allreduce']).step, false);
    assert.equal(parseBenchArgs(['--op', 'allreduce', '--step']).step, true);
    assert.equal(parseBenchArgs(['--no-step']).step, false);
  });
});

test('the default schedule: about 1 GiB timed (at most 1000 iterations, 20,000 calls) after up to 10,000 warm-up calls (2000 steps of several tensors)', () => {
  assert.equal(autoIterations(4), 1000);
  assert.equal(autoIterations(1 << 20), 1000);
  assert.equal(autoIterations(16 << 20), 64);
  assert.equal(autoIterations(2 ** 31), 3);
  // A step of 100 tensors of 4 KiB: 200 steps, 20,000 calls.
  assert.equal(autoIterations(4096, 100), 200);
  assert.equal(autoWarmup(4), 10_000);
  assert.equal(autoWarmup(1 << 20), 4096);
  assert.equal(autoWarmup(16 << 20), 256);
  assert.equal(autoWarmup(2 ** 33), 2);
  assert.equal(autoWarmup(4096, 100), 2000);
  assert.equal(autoWarmup(1 << 20, 8), 512);
  assert.equal(parseBenchArgs([]).warmup, undefined);
  assert.equal(parseBenchArgs(['-w', '0']).warmup, 0);
});
