/**
 * The result types tell the truth: every collective's result is the input's class on a
 * SharedArrayBuffer (Result, SharedTypedArray), in its type and at run time, for every class.
 *
 * The type checks run when this file compiles (`npm run build`): `sameType<A, B>()` compiles only
 * if A and B are the same type, and each `@ts-expect-error` line must stay an error (a result
 * passed where an ArrayBuffer-backed array is required fails at run time, so it must not
 * compile). The run-time checks call each collective on a job of one rank, its engine in a
 * worker thread as a user's is, and look at each result's buffer.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as rr from '../../src/index.js';

/** True if A and B are the same type (not merely assignable one way). */
type Equal<A, B> = (<X>() => X extends A ? 1 : 2) extends <X>() => X extends B ? 1 : 2 ? true : false;
/** Compiles only if A and B are the same type (otherwise it wants an argument of type never). */
function sameType<A, B>(..._: Equal<A, B> extends true ? [] : [never]): void {}

/** Type checks only: compiled, never called. */
export async function resultTypes(r: rr.RingReduce): Promise<void> {
  // Each class gives the same class back, on a SharedArrayBuffer, whatever buffer the input had.
  sameType<Awaited<ReturnType<typeof r.allreduce<Float32Array<ArrayBuffer>>>>, Float32Array<SharedArrayBuffer>>();
  sameType<rr.Result<Float32Array>, Float32Array<SharedArrayBuffer>>();
  sameType<rr.Result<Float64Array>, Float64Array<SharedArrayBuffer>>();
  sameType<rr.Result<Int8Array>, Int8Array<SharedArrayBuffer>>();
  sameType<rr.Result<Int16Array>, Int16Array<SharedArrayBuffer>>();
  sameType<rr.Result<Int32Array<ArrayBuffer>>, Int32Array<SharedArrayBuffer>>();
  sameType<rr.Result<Uint8Array<ArrayBuffer>>, Uint8Array<SharedArrayBuffer>>();
  sameType<rr.Result<Uint16Array>, Uint16Array<SharedArrayBuffer>>();
  sameType<rr.Result<Uint32Array<SharedArrayBuffer>>, Uint32Array<SharedArrayBuffer>>();
  sameType<rr.Result<BigInt64Array>, BigInt64Array<SharedArrayBuffer>>();
  sameType<rr.Result<BigUint64Array>, BigUint64Array<SharedArrayBuffer>>();
  // { data, shape } in gives { data, shape } out; a union of classes gives the union of results.
  sameType<rr.Result<rr.ShapedTensor<Int32Array>>, rr.ShapedTensor<Int32Array<SharedArrayBuffer>>>();
  sameType<rr.Result<Float32Array | Int8Array>, Float32Array<SharedArrayBuffer> | Int8Array<SharedArrayBuffer>>();
  sameType<rr.Result<rr.TypedArray>, rr.SharedTypedArray>();

  // Every call that allocates its result says so, the Sync ones too.
  const local = new Float32Array(8); // Float32Array<ArrayBuffer>
  sameType<typeof local, Float32Array<ArrayBuffer>>();
  sameType<Awaited<ReturnType<typeof rr.allreduce<typeof local>>>, Float32Array<SharedArrayBuffer>>();
  sameType<ReturnType<typeof r.allreduceSync<typeof local>>, Float32Array<SharedArrayBuffer>>();
  const sum = await r.allreduce(local);
  sameType<typeof sum, Float32Array<SharedArrayBuffer>>();
  sameType<typeof sum, Awaited<ReturnType<typeof r.allgather<typeof local>>>>();
  sameType<typeof sum, Awaited<ReturnType<typeof r.broadcast<typeof local>>>>();
  sameType<typeof sum, Awaited<ReturnType<typeof r.reducescatter<typeof local>>>>();
  sameType<typeof sum, Awaited<ReturnType<typeof r.alltoall<typeof local>>>['output']>();
  sameType<typeof sum | null, Awaited<ReturnType<typeof r.reduce<typeof local>>>>();
  sameType<typeof sum | null, Awaited<ReturnType<typeof r.gather<typeof local>>>>();
  sameType<(typeof sum)[], Awaited<ReturnType<typeof r.groupedAllreduce<typeof local>>>>();
  sameType<rr.ShapedTensor<rr.SharedTypedArray>, Awaited<ReturnType<typeof r.scatter>>>();
  sameType<rr.ShapedTensor<rr.SharedTypedArray>, ReturnType<typeof rr.scatterSync>>();
  // recv writes into the caller's own array and gives it back: its type stays the caller's.
  sameType<typeof local, Awaited<ReturnType<typeof r.recv<typeof local>>>>();
  // ...and from 'any' with the sender; a batch's results follow its entries.
  if (r.size() > 1) {
    const any = await r.recv(local, { from: 'any' });
    sameType<typeof any, rr.Received<typeof local>>();
    const batch = await r.batchSendRecv([
      { op: 'send', tensor: local, to: 1 },
      { op: 'recv', into: local, from: 1 },
      { op: 'recv', into: new Int8Array(1), from: 'any' },
    ]);
    sameType<typeof batch, [undefined, typeof local, rr.Received<Int8Array<ArrayBuffer>>]>();
  }

  // A result fits where any Float32Array is wanted, and a copy where an ArrayBuffer-backed one is...
  const anyBuffer: Float32Array = sum;
  await crypto.subtle.digest('SHA-256', anyBuffer.slice());
  const copy: Float32Array<ArrayBuffer> = new Float32Array(sum);
  // ...but the result itself does not: these fail at run time, so they must not compile.
  // @ts-expect-error a SharedArrayBuffer-backed view is not a BufferSource
  await crypto.subtle.digest('SHA-256', sum);
  // @ts-expect-error not an ArrayBuffer-backed Float32Array
  const arrayBacked: Float32Array<ArrayBuffer> = sum;
  // @ts-expect-error the class is kept: a Float32Array's result is no Float64Array
  const otherClass: Float64Array = sum;
  void [copy, arrayBacked, otherClass];
}

const kClasses = [
  Float32Array,
  Float64Array,
  Int8Array,
  Int16Array,
  Int32Array,
  Uint8Array,
  Uint16Array,
  Uint32Array,
  BigInt64Array,
  BigUint64Array,
] as const;

/** `length` elements of class `Ctor` on an ArrayBuffer, 1, 2, 3, ... */
function input(Ctor: (typeof kClasses)[number], length: number): rr.TypedArray {
  const values = Array.from({ length }, (_, i) => i + 1);
  if (Ctor === BigInt64Array || Ctor === BigUint64Array) return new Ctor(values.map(BigInt));
  return new (Ctor as Float64ArrayConstructor)(values); // any number class: the cast picks one signature
}

function assertShared(result: unknown, Ctor: (typeof kClasses)[number], what: string): void {
  assert.ok(result instanceof Ctor, `${what}: ${Object.prototype.toString.call(result)}`);
  assert.ok(result.buffer instanceof SharedArrayBuffer, `${what}: on ${Object.prototype.toString.call(result.buffer)}`);
}

describe('results at run time', () => {
  let r: rr.RingReduce;
  before(async () => {
    r = await rr.RingReduce.init({ size: 1, logLevel: 'error' });
  });
  after(() => r.shutdown());

  it('every collective gives the input class back on a SharedArrayBuffer, for every class', async () => {
    for (const Ctor of kClasses) {
      const t = input(Ctor, 4);
      const shaped = { data: t, shape: [2, 2] };
      const name = Ctor.name;
      assertShared(await r.allreduce(t), Ctor, `allreduce ${name}`);
      assertShared(r.allreduceSync(t), Ctor, `allreduceSync ${name}`);
      assertShared((await r.allgather(shaped)).data, Ctor, `allgather ${name}`);
      assertShared(await r.broadcast(t), Ctor, `broadcast ${name}`);
      assertShared(await r.reducescatter(t), Ctor, `reducescatter ${name}`);
      assertShared((await r.alltoall(t)).output, Ctor, `alltoall ${name}`);
      assertShared(await r.reduce(t), Ctor, `reduce ${name}`);
      assertShared(await r.gather(t), Ctor, `gather ${name}`);
      assertShared((await r.scatter(shaped)).data, Ctor, `scatter ${name}`);
      for (const result of await r.groupedAllreduce([t, t])) assertShared(result, Ctor, `groupedAllreduce ${name}`);
    }
    assertShared(await r.allreduce(input(Float32Array, 4), { compression: 'fp16' }), Float32Array, 'allreduce fp16');
  });
});
