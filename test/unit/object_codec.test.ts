/**
 * The bytes of the object collectives (api/object_codec.ts): what survives the trip, what changes
 * (-0, holes, class instances), what is refused and how the refusal names the place, and that the
 * bytes do not depend on the instance or on what was encoded before (every rank, Node or browser,
 * encodes alike; the browser test compares a browser's bytes with these).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import { decodeObject, encodeObject } from '../../src/api/object_codec.js';
import { InvalidArgumentError } from '../../src/core/errors.js';

const trip = (value: unknown) => decodeObject(encodeObject(value));

describe('object codec', () => {
  it('carries what structured clone carries', () => {
    const values: Record<string, unknown> = {
      map: new Map<unknown, unknown>([
        [1, 'a'],
        [{ k: 1 }, new Set([1, 'x'])],
      ]),
      set: new Set([1, 'two', null]),
      date: new Date(Date.UTC(2024, 1, 29)),
      floats: new Float32Array([1.5, -0, Number.NaN]),
      view: new Float64Array([1, 2, 3, 4]).subarray(1, 3),
      int64: BigInt64Array.from([-(2n ** 63n), 2n ** 63n - 1n]),
      bytes: new ArrayBuffer(5),
      regexp: /a+b/giu,
      undefinedAlone: undefined,
      undefinedInside: { a: undefined, list: [undefined, 1] },
      numbers: [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, 2 ** 53, -1.5e-300],
      bigints: [0n, -5n, 2n ** 64n, -(2n ** 70n), 2n ** 900n],
      text: 'Grüße, 日本語, 🚀',
    };
    for (const [what, value] of Object.entries(values)) assert.ok(isDeepStrictEqual(trip(value), value), what);
    const error = trip(new TypeError('boom')) as Error;
    assert.ok(error instanceof TypeError);
    assert.equal(error.message, 'boom');
  });

  it('keeps shared references and cycles', () => {
    const shared = { n: 1 };
    const value: Record<string, unknown> = { a: shared, b: shared };
    value.self = value;
    const back = trip(value) as Record<string, unknown>;
    assert.equal(back.a, back.b);
    assert.equal(back.self, back);
  });

  it('differs from structured clone where MessagePack does: -0, holes, class instances, toJSON', () => {
    assert.ok(Object.is(trip(-0), 0));
    // biome-ignore lint/suspicious/noSparseArray: the hole is the point
    assert.deepEqual(trip([1, , 3]), [1, undefined, 3]);
    class Point {
      x = 1;
      toJSON() {
        return 'not used';
      }
    }
    const point = trip(new Point());
    assert.deepEqual(point, { x: 1 });
    assert.equal(Object.getPrototypeOf(point), Object.prototype);
  });

  it('refuses functions and symbols, naming where they are', () => {
    const refused = (value: unknown, where: string) =>
      assert.throws(
        () => encodeObject(value),
        (error: unknown) =>
          error instanceof InvalidArgumentError &&
          error.message ===
            `value cannot be sent: ${where}; object collectives carry structured-clone values, without functions or symbols`,
      );
    refused(() => 1, 'value is a function');
    refused(Symbol('s'), 'value is a symbol');
    refused({ a: { 'b-c': [0, Symbol('s')] } }, 'value.a["b-c"][1] is a symbol');
    refused(new Map([[Symbol('k'), 1]]), 'value (key 0 of the Map) is a symbol');
    refused(new Set([1, () => 2]), 'value (item 1 of the Set) is a function');
    refused({ method() {} }, 'value.method is a function');
  });

  it('encodes alike every time, whatever was encoded before', () => {
    const value = {
      list: Array.from({ length: 20 }, (_, i) => ({ i, odd: i % 2 === 1 })),
      map: new Map([['k', { i: 0, odd: false }]]),
    };
    const first = encodeObject(value);
    encodeObject({ other: [1, 2, { i: 'x' }] });
    assert.deepEqual(encodeObject(value), first);
  });

  it('hands out its own bytes, and decodes from shared memory', () => {
    const first = encodeObject('first');
    encodeObject('second, which msgpackr packs into the buffer it reuses');
    assert.equal(decodeObject(first), 'first');
    const shared = new Uint8Array(new SharedArrayBuffer(first.length));
    shared.set(first);
    assert.equal(decodeObject(shared), 'first');
  });
});
