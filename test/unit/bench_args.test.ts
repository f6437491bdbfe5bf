import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseBenchArgs } from '../../bench/args.js';

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
