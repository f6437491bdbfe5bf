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
export type Compression = (typeof kCompressions)[number];

/**
 * The reduce ops, in wire order (append only): their index is their code in negotiation messages.
 * 'average' is for float dtypes only, the bitwise 'band', 'bor' and 'bxor' for integer ones only.
 */
export const kReduceOps = ['sum', 'average', 'min', 'max', 'product', 'band', 'bor', 'bxor'] as const;
export type ReduceOp = (typeof kReduceOps)[number];

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
