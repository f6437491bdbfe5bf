/** Public types shared by the API, the engine and the algorithms. */

export type DType = 'float32' | 'float64' | 'int8' | 'int16' | 'int32' | 'uint8' | 'uint16' | 'uint32' | 'int64' | 'uint64';

/**
 * What the engine and the algorithms move: a caller's dtype, or 'float16', the wire form of
 * float32 tensors under `compression: 'fp16'` (IEEE binary16 in a Float16Bits, core/float16.ts;
 * reduced in float32). Callers never pass or receive it.
 */
export type WireDType = DType | 'float16';

/** The compressions of option 'compression': 'fp16' sends float32 tensors as IEEE binary16. */
export const kCompressions = ['none', 'fp16'] as const;
/**
 * Option `compression` of allreduce, allgather, reducescatter (and their grouped forms) and of
 * DistributedOptimizer: 'none' (default), or 'fp16', float32 tensors sent as IEEE binary16.
 */
export type Compression = (typeof kCompressions)[number];

/**
 * The reduce ops, in wire order (append only): their index is their code in negotiation messages.
 * 'average' is for float dtypes only, the bitwise 'band', 'bor' and 'bxor' for integer ones only.
 */
export const kReduceOps = ['sum', 'average', 'min', 'max', 'product', 'band', 'bor', 'bxor'] as const;
/**
 * Option `op` of the reductions (allreduce, reducescatter, reduce): element-wise 'sum'
 * (default), 'average' (the sum divided by the ranks that contributed; float dtypes only), 'min',
 * 'max', 'product', or bitwise 'band', 'bor', 'bxor' (integer dtypes only). Integers wrap as C's do.
 */
export type ReduceOp = (typeof kReduceOps)[number];

/**
 * allreduce's ops in wire order: the reduce ops, then 'adasum' (code 8). A new reduce op would
 * move adasum's code, which test/unit/op_wire_order.test.ts pins: it needs its code after it.
 */
export const kAllreduceOps = [...kReduceOps, 'adasum'] as const;
/**
 * Option `op` of allreduce: a {@link ReduceOp}, or 'adasum' (Horovod's Adasum: the ranks'
 * vectors combined pairwise as a' = (1 - a·b/2|a|²)·a + (1 - a·b/2|b|²)·b; float dtypes and
 * power-of-two rank counts only, docs/algorithms.md).
 */
export type AllreduceOp = (typeof kAllreduceOps)[number];

/**
 * When allreduce and allgather run hierarchically on a multi-host job (Horovod's
 * HOROVOD_HIERARCHICAL_ALLREDUCE / _ALLGATHER): 'auto' where it pays, 'on' whenever the host
 * layout allows it, 'off' never (algorithms/hierarchy.ts).
 */
export const kHierarchicalModes = ['auto', 'on', 'off'] as const;
export type HierarchicalMode = (typeof kHierarchicalModes)[number];

/** Every typed array class ringreduce accepts (Uint8ClampedArray is refused: it clamps, it does not wrap). */
export type TypedArray =
  | Float32Array
  | Float64Array
  | Int8Array
  | Int16Array
  | Int32Array
  | Uint8Array
  | Uint16Array
  | Uint32Array
  | BigInt64Array
  | BigUint64Array;

/**
 * Option 'splits' (alltoall, scatter, reducescatter): rows of the first dimension for each rank,
 * in rank order, as an array or as any integer typed array (Horovod's splits are an int32 tensor).
 */
export type Splits =
  | readonly number[]
  | Int8Array
  | Uint8Array
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | BigInt64Array
  | BigUint64Array;

/** A tensor with an explicit shape; product(shape) === data.length. */
export interface ShapedTensor<T extends TypedArray = TypedArray> {
  data: T;
  shape: readonly number[];
}

/** What a collective accepts: a 1-D typed array, or data with a shape. */
export type TensorLike<T extends TypedArray = TypedArray> = T | ShapedTensor<T>;

/**
 * The class of `T` on a SharedArrayBuffer: `Float32Array<SharedArrayBuffer>` for any
 * `Float32Array`, and so on for each class; with no argument, any class of {@link TypedArray} on a
 * SharedArrayBuffer. Every array a collective allocates for its result is of this kind: the
 * engine thread writes into it. Such an array fits where a `Float32Array` of any buffer is
 * expected, not where an ArrayBuffer-backed one is (`Float32Array<ArrayBuffer>`, a `BufferSource`
 * such as `crypto.subtle.digest` takes), and its buffer cannot be transferred (`postMessage`,
 * `structuredClone`): for those, copy it (`result.slice()` or `new Float32Array(result)`).
 * @example
 * const sum: SharedTypedArray<Float32Array> = await rr.allreduce(new Float32Array(4));
 * const digest = await crypto.subtle.digest('SHA-256', sum.slice()); // slice(): an ArrayBuffer copy
 */
export type SharedTypedArray<T extends TypedArray = TypedArray> = T extends Float32Array
  ? Float32Array<SharedArrayBuffer>
  : T extends Float64Array
    ? Float64Array<SharedArrayBuffer>
    : T extends Int8Array
      ? Int8Array<SharedArrayBuffer>
      : T extends Int16Array
        ? Int16Array<SharedArrayBuffer>
        : T extends Int32Array
          ? Int32Array<SharedArrayBuffer>
          : T extends Uint8Array
            ? Uint8Array<SharedArrayBuffer>
            : T extends Uint16Array
              ? Uint16Array<SharedArrayBuffer>
              : T extends Uint32Array
                ? Uint32Array<SharedArrayBuffer>
                : T extends BigInt64Array
                  ? BigInt64Array<SharedArrayBuffer>
                  : T extends BigUint64Array
                    ? BigUint64Array<SharedArrayBuffer>
                    : never;
