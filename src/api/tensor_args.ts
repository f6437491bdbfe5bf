/**
 * Argument checking at the edge, done once per call: after this the engine trusts what it gets.
 * Every error names the argument and what was wrong with it.
 */
import { callerDTypeOf, dtypeOf, isFloat, reduceOpFits } from '../core/dtypes.js';
import { InvalidArgumentError } from '../core/errors.js';
import { isPowerOfTwo } from '../core/shapes.js';
import { type AllreduceOp, type DType, kReduceOps, type ReduceOp, type TensorLike, type TypedArray } from '../core/types.js';

export interface ParsedTensor {
  data: TypedArray;
  shape: number[];
  dtype: DType;
  /** Whether the caller passed { data, shape } (and so gets { data, shape } back). */
  shaped: boolean;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value !== 'object') return typeof value;
  return (value as object).constructor?.name ?? 'object';
}

function checkDType(data: unknown, argName: string): DType {
  const dtype = callerDTypeOf(data);
  if (dtype === undefined) {
    const hint = data instanceof Uint8ClampedArray ? ' (Uint8ClampedArray clamps instead of wrapping; use Uint8Array)' : '';
    throw new InvalidArgumentError(
      `${argName} must be a typed array (Float32Array, Float64Array, Int8/16/32Array, Uint8/16/32Array, BigInt64Array or BigUint64Array), got ${describe(data)}${hint}`,
    );
  }
  return dtype;
}

export function parseTensor(value: TensorLike | unknown, argName = 'tensor'): ParsedTensor {
  if (ArrayBuffer.isView(value)) {
    const dtype = checkDType(value, argName);
    const data = value as TypedArray;
    return { data, shape: [data.length], dtype, shaped: false };
  }
  if (typeof value !== 'object' || value === null || !('data' in value) || !('shape' in value)) {
    throw new InvalidArgumentError(`${argName} must be a typed array or { data, shape }, got ${describe(value)}`);
  }
  const { data, shape } = value as { data: unknown; shape: unknown };
  const dtype = checkDType(data, `${argName}.data`);
  if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
    throw new InvalidArgumentError(`${argName}.shape must be an array of non-negative integers, got ${JSON.stringify(shape)}`);
  }
  const typed = data as TypedArray;
  const count = shape.reduce((a: number, b: number) => a * b, 1);
  if (count !== typed.length) {
    throw new InvalidArgumentError(
      `${argName}.shape [${shape.join(', ')}] holds ${count} elements but ${argName}.data has ${typed.length}`,
    );
  }
  return { data: typed, shape: [...shape], dtype, shaped: true };
}

export function parseName(name: unknown): string | undefined {
  if (name === undefined) return undefined;
  if (typeof name !== 'string' || name.length === 0 || name.length > 1024) {
    throw new InvalidArgumentError(
      `option 'name' must be a non-empty string of at most 1024 characters, got ${JSON.stringify(name)}`,
    );
  }
  return name;
}

export function parseReduceOp(op: unknown, dtype: DType): ReduceOp {
  if (op === undefined) return 'sum';
  if (op === 'adasum') throw new InvalidArgumentError("option 'op' 'adasum' is allreduce's only (it combines whole vectors)");
  if (!kReduceOps.includes(op as ReduceOp)) {
    throw new InvalidArgumentError(`option 'op' must be one of ${kReduceOps.join(', ')}, got ${JSON.stringify(op)}`);
  }
  if (op === 'average' && !isFloat(dtype)) {
    throw new InvalidArgumentError(
      `option 'op' is 'average' but the tensor is ${dtype}: an integer average would truncate; use op 'sum' and divide`,
    );
  }
  if (!reduceOpFits(dtype, op as ReduceOp)) {
    throw new InvalidArgumentError(`option 'op' is '${op}' but the tensor is ${dtype}: bitwise ops need an integer dtype`);
  }
  return op as ReduceOp;
}

/**
 * allreduce's option 'op': a reduce op, or 'adasum', which needs a float tensor and a
 * power-of-two number of ranks in the set it runs in (`size`).
 */
export function parseAllreduceOp(op: unknown, dtype: DType, size: number): AllreduceOp {
  if (op !== 'adasum') {
    if (op !== undefined && !kReduceOps.includes(op as ReduceOp)) {
      throw new InvalidArgumentError(`option 'op' must be one of ${kReduceOps.join(', ')}, adasum, got ${JSON.stringify(op)}`);
    }
    return parseReduceOp(op, dtype);
  }
  if (!isFloat(dtype)) {
    throw new InvalidArgumentError(`option 'op' is 'adasum' but the tensor is ${dtype}: adasum needs float32 or float64`);
  }
  if (!isPowerOfTwo(size)) {
    throw new InvalidArgumentError(
      `option 'op' is 'adasum' but the job (or process set) has ${size} ranks: adasum runs on 1, 2, 4, 8, ... ranks (a power of two)`,
    );
  }
  return 'adasum';
}

export function parseRoot(root: unknown, size: number): number {
  if (root === undefined) return 0;
  if (!Number.isInteger(root) || (root as number) < 0 || (root as number) >= size) {
    throw new InvalidArgumentError(`option 'root' must be an integer rank in [0, ${size - 1}], got ${JSON.stringify(root)}`);
  }
  return root as number;
}

/**
 * Option 'out': where the result goes, so a loop can reuse one buffer instead of paying for
 * fresh memory on every call (first-touch page faults cost more than the collective for large
 * tensors). It must be the tensor's dtype and length and live in a SharedArrayBuffer (the engine
 * thread works on it); it may be the input itself (in place).
 */
export function parseOut(out: unknown, t: ParsedTensor): TypedArray | undefined {
  const typed = parseGatherOut(out, t);
  if (typed && typed.length !== t.data.length) {
    throw new InvalidArgumentError(`option 'out' has ${typed.length} elements but the tensor has ${t.data.length}`);
  }
  return typed;
}

/** Option 'out' for a result of exactly `length` elements (reducescatter: this rank's rows). */
export function parseOutOfLength(out: unknown, t: ParsedTensor, length: number, what: string): TypedArray | undefined {
  const typed = parseGatherOut(out, t);
  if (typed && typed.length !== length) {
    throw new InvalidArgumentError(`option 'out' has ${typed.length} elements but ${what} has ${length}`);
  }
  return typed;
}

/**
 * Options 'prescale' and 'postscale' (Horovod's): finite numbers multiplying the input before the
 * reduction and the result after it; float tensors only (an integer tensor would truncate).
 */
export function parseScales(o: Record<string, unknown>, dtype: DType): Scales {
  // Most calls scale nothing: they share one empty answer instead of allocating one.
  if ((o.prescale === undefined || o.prescale === 1) && (o.postscale === undefined || o.postscale === 1)) return kNoScales;
  const scales: { prescale?: number; postscale?: number } = {};
  for (const key of kScaleKeys) {
    const value = o[key];
    if (value === undefined || value === 1) continue;
    if (typeof value !== 'number' || !Number.isFinite(value)) {
      throw new InvalidArgumentError(`option '${key}' must be a finite number, got ${JSON.stringify(value)}`);
    }
    if (!isFloat(dtype)) throw new InvalidArgumentError(`option '${key}' needs a float tensor, got ${dtype}`);
    scales[key] = value;
  }
  return scales;
}

type Scales = { readonly prescale?: number; readonly postscale?: number };
const kNoScales: Scales = Object.freeze({});
const kScaleKeys = ['prescale', 'postscale'] as const;

/**
 * Option 'splits': how many rows (first dimension) go to each rank, in rank order: `size`
 * non-negative integers adding up to `rows`, as an array or an integer typed array (Horovod
 * passes an int32 tensor). Unset: `fallback`, or an error naming the option.
 */
export function parseSplits(splits: unknown, rows: number, size: number, fallback: () => number[]): number[] {
  if (splits === undefined) return fallback();
  const counts = splitCounts(splits);
  if (counts === undefined || counts.length !== size || !counts.every((s) => Number.isSafeInteger(s) && s >= 0)) {
    throw new InvalidArgumentError(
      `option 'splits' must be an array or integer typed array of ${size} non-negative integers (rows for each rank), got ${describeCounts(splits)}`,
    );
  }
  const total = counts.reduce((a, b) => a + b, 0);
  if (total !== rows) {
    throw new InvalidArgumentError(`option 'splits' adds up to ${total} rows but the tensor has ${rows}`);
  }
  return counts;
}

/** The entries of an array or an integer typed array, as numbers (bigints beyond 2^53 stay unsafe); undefined for anything else. */
function splitCounts(splits: unknown): number[] | undefined {
  if (Array.isArray(splits)) return [...splits];
  if (!ArrayBuffer.isView(splits) || splits instanceof DataView) return undefined;
  const dtype = dtypeOf(splits);
  if (dtype === undefined || isFloat(dtype)) return undefined;
  return Array.from(splits as unknown as ArrayLike<number | bigint>, (s) => (typeof s === 'bigint' ? bigintCount(s) : s));
}

function bigintCount(s: bigint): number {
  return s <= BigInt(Number.MAX_SAFE_INTEGER) && s >= BigInt(Number.MIN_SAFE_INTEGER) ? Number(s) : Number.NaN;
}

/** A count list as the caller wrote it: JSON for arrays, "Int32Array [1, 2]" for typed arrays. */
function describeCounts(value: unknown): string {
  if (ArrayBuffer.isView(value) && !(value instanceof DataView)) {
    const items = Array.from(value as unknown as ArrayLike<number | bigint>, String);
    return `${describe(value)} [${items.join(', ')}]`;
  }
  return JSON.stringify(value) ?? String(value);
}

/** The tensor's first dimension; collectives that split or concatenate along it need one. */
export function firstDimension(t: ParsedTensor, op: string): number {
  const rows = t.shape[0];
  if (rows === undefined) {
    throw new InvalidArgumentError(`tensor of ${op} must have at least one dimension (it works along the first)`);
  }
  return rows;
}

/**
 * Option 'out' of allgather: like parseOut, but its length is the gathered size, which only
 * negotiation knows (rank 0 checks it there, so a wrong one fails on every rank alike).
 */
export function parseGatherOut(out: unknown, t: ParsedTensor): TypedArray | undefined {
  if (out === undefined) return undefined;
  if (!ArrayBuffer.isView(out) || dtypeOf(out) !== t.dtype) {
    throw new InvalidArgumentError(`option 'out' must be a ${t.dtype} typed array like the tensor, got ${describe(out)}`);
  }
  return sharedOnly(out as TypedArray);
}

function sharedOnly(out: TypedArray): TypedArray {
  if (!(out.buffer instanceof SharedArrayBuffer)) {
    throw new InvalidArgumentError(`option 'out' must be backed by a SharedArrayBuffer (the engine thread writes into it)`);
  }
  return out;
}

/**
 * Option 'out' of a rank that passes no tensor (scatter off the root): any dtype, checked against
 * the root's in the agreement.
 */
export function parseSharedOut(out: unknown): { array: TypedArray; dtype: DType } | undefined {
  if (out === undefined) return undefined;
  return { array: sharedOnly(out as TypedArray), dtype: checkDType(out, "option 'out'") };
}

export function checkOptions(options: unknown, allowed: readonly string[]): Record<string, unknown> {
  if (options === undefined) return {};
  if (typeof options !== 'object' || options === null) {
    throw new InvalidArgumentError(`options must be an object, got ${describe(options)}`);
  }
  // for-in over a plain object allocates nothing (Object.keys would, on every call).
  for (const key in options) {
    if (Object.hasOwn(options, key) && !allowed.includes(key)) {
      throw new InvalidArgumentError(`unknown option '${key}' (allowed: ${allowed.join(', ')})`);
    }
  }
  return options as Record<string, unknown>;
}
