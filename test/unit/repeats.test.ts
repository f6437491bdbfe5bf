/**
 * Repeated calls (api/repeats.ts): a call is a repeat of the remembered one of its name only when
 * it would prepare the same: the same preparation, the same tensor object of the same length, the
 * same output length, and the same option values in the same order.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Prepared } from '../../src/api/call.js';
import { Repeats } from '../../src/api/repeats.js';
import { allocShared } from '../../src/core/dtypes.js';
import type { TypedArray } from '../../src/core/types.js';

const prepareA = () => undefined;
const prepareB = () => undefined;

function preparedFor(out: TypedArray, set?: number): Prepared {
  const prepared: Prepared = {
    request: { name: 'g', op: 'allreduce', dtype: 'float32', shape: [out.length], reduceOp: 'sum' } as Prepared['request'],
    buffer: out,
    finish: () => out,
    again: () => {},
  };
  if (set !== undefined) prepared.set = set;
  return prepared;
}

type GrowableShared = new (
  byteLength: number,
  options: { maxByteLength: number },
) => SharedArrayBuffer & { grow(byteLength: number): void };

describe('Repeats', () => {
  const tensor = new Float32Array(4);
  const out = allocShared('float32', 4);

  it('finds a call with the same tensor and option values, in a fresh options object', () => {
    const repeats = new Repeats<Prepared>();
    const prepared = preparedFor(out);
    repeats.remember(prepareA, tensor, { name: 'g', out }, prepared);
    assert.equal(repeats.find(prepareA, tensor, { name: 'g', out })?.prepared, prepared);
  });

  it('does not find a call that differs in anything the preparation checked', () => {
    const repeats = new Repeats<Prepared>();
    repeats.remember(prepareA, tensor, { name: 'g', out }, preparedFor(out));
    assert.equal(repeats.find(prepareB, tensor, { name: 'g', out }), undefined, 'another op');
    assert.equal(repeats.find(prepareA, new Float32Array(4), { name: 'g', out }), undefined, 'another tensor');
    assert.equal(repeats.find(prepareA, tensor, { name: 'g', out: allocShared('float32', 4) }), undefined, 'another output');
    assert.equal(repeats.find(prepareA, tensor, { name: 'g', out, op: 'max' }), undefined, 'an option more');
    assert.equal(repeats.find(prepareA, tensor, { name: 'g' }), undefined, 'an option less');
    assert.equal(repeats.find(prepareA, tensor, { out, name: 'g' }), undefined, 'options in another order');
    assert.equal(repeats.find(prepareA, tensor, { name: 'h', out }), undefined, 'another name');
    assert.equal(
      repeats.find(prepareA, tensor, Object.assign(Object.create({ op: 'max' }), { name: 'g', out })),
      undefined,
      'inherited options',
    );
    assert.equal(repeats.find(prepareA, tensor, undefined), undefined, 'no options');
  });

  it('does not find a call whose tensor or output changed length (a view of a growable buffer)', () => {
    const repeats = new Repeats<Prepared>();
    const growable = new (SharedArrayBuffer as unknown as GrowableShared)(16, { maxByteLength: 32 });
    const tracking = new Float32Array(growable);
    repeats.remember(prepareA, tracking, { name: 'g', out: tracking }, preparedFor(tracking));
    assert.ok(repeats.find(prepareA, tracking, { name: 'g', out: tracking }));
    growable.grow(32);
    assert.equal(tracking.length, 8);
    assert.equal(repeats.find(prepareA, tracking, { name: 'g', out: tracking }), undefined);
  });

  it('finds a grouped call: the same tensors in order (any array), outputs element by element (an array the caller changed is another call)', () => {
    const repeats = new Repeats<readonly Prepared[]>();
    const a = new Float32Array(4);
    const b = new Float32Array(4);
    const outA = allocShared('float32', 4);
    const outB = allocShared('float32', 4);
    const members = [preparedFor(outA), preparedFor(outB)];
    const outs = [outA, outB];
    repeats.remember(prepareA, [a, b], { name: 'g', outs }, members);
    assert.equal(repeats.find(prepareA, [a, b], { name: 'g', outs: [outA, outB] })?.prepared, members);
    assert.equal(repeats.find(prepareA, [b, a], { name: 'g', outs: [outA, outB] }), undefined, 'another order');
    assert.equal(repeats.find(prepareA, [a], { name: 'g', outs: [outA] }), undefined, 'fewer tensors');
    assert.equal(repeats.find(prepareA, [a, b], { name: 'g', outs: [outA, outA] }), undefined, 'another output');
    outs[1] = outA;
    assert.equal(repeats.find(prepareA, [a, b], { name: 'g', outs }), undefined, 'the remembered array was changed since');
  });

  it('remembers only calls that may repeat, and forgets a removed set and everything at a restart', () => {
    const repeats = new Repeats<Prepared>();
    const once = { ...preparedFor(out) };
    delete once.again;
    repeats.remember(prepareA, tensor, { name: 'g', out }, once);
    assert.equal(repeats.find(prepareA, tensor, { name: 'g', out }), undefined, 'no again: not remembered');
    repeats.remember(prepareA, tensor, { name: 'g', out }, preparedFor(out, 3));
    repeats.remember(prepareA, tensor, { name: 'w', out }, preparedFor(out));
    repeats.forgetSet(3);
    assert.equal(repeats.find(prepareA, tensor, { name: 'g', out }), undefined, 'its set was removed');
    assert.ok(repeats.find(prepareA, tensor, { name: 'w', out }), "another set's call stays");
    repeats.clear();
    assert.equal(repeats.find(prepareA, tensor, { name: 'w', out }), undefined, 'cleared');
  });
});
