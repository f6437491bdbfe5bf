/**
 * The format of a conformance case, and the checks the cases share.
 *
 * A case is written once, for one rank: `run(rr, rank, size)` makes the collectives of that rank
 * and checks that rank's results. Inputs are deterministic (test/helpers/reference.ts), so every
 * rank can build every rank's input and the expected result itself. The backends run it as a
 * job does: an in-process world (memory, tcp) calls `run` for every rank at once and awaits them
 * all; an MPI job (one process per rank) calls it for its own rank (runner.ts).
 *
 * Every rank must make the same collectives whatever fails, or the next case would find the
 * ranks out of step: a case awaits all its calls (settleAll) before it reports what failed.
 */
import type { RingReduce } from '../../../src/api/runtime.js';
import { isFloat, kDTypes } from '../../../src/core/dtypes.js';
import { InvalidArgumentError } from '../../../src/core/errors.js';
import type { DType, ReduceOp, TypedArray } from '../../../src/core/types.js';
import { compareArrays } from '../../helpers/reference.js';

export interface ConformanceCase {
  /** Unique in the list: it names the test and every failure. */
  readonly name: string;
  /** The smallest job the case applies to (default 1); smaller jobs skip it. */
  readonly minRanks?: number;
  /**
   * The case makes ...Sync calls. Each blocks its rank's thread until every rank has made the
   * call, so the case needs a thread per rank: it runs under MPI, and in-process only in a job
   * of one rank whose engine has its own thread (tcp).
   */
  readonly needsSync?: boolean;
  /**
   * Runs the case on rank `rank` of a job of `size` ranks, `rr` being that rank, while every
   * other rank runs it too. Resolves when every check passed; rejects with what failed.
   */
  run(rr: RingReduce, rank: number, size: number): Promise<void>;
}

/** A failed check; its message says what was checked and how it failed. */
export class CheckError extends Error {
  override name = 'CheckError';
}

/**
 * The reduce ops the allreduce cases check, for every dtype ('average' for floats only, the
 * bitwise ones for integers only). A new op joins this list once the library and the reference
 * (test/helpers/reference.ts) know it.
 */
export const kOps: readonly ReduceOp[] = ['sum', 'average', 'min', 'max', 'product', 'band', 'bor', 'bxor'];

/** The bitwise ops of kOps: integer dtypes only (refused on floats at the call). */
export const kBitwiseOps: readonly ReduceOp[] = ['band', 'bor', 'bxor'];

/** The ops of kOps that `dtype` supports. */
export function opsFor(dtype: DType): ReduceOp[] {
  return kOps.filter((op) => (isFloat(dtype) ? !kBitwiseOps.includes(op) : op !== 'average'));
}

/** Every dtype with every op it supports. */
export const kCombos: ReadonlyArray<{ dtype: DType; op: ReduceOp }> = kDTypes.flatMap((dtype) =>
  opsFor(dtype).map((op) => ({ dtype, op })),
);

/** The counts where a collective's splitting goes wrong first: empty, one, around the rank count, and larger. */
export function edgeCounts(size: number): number[] {
  return [...new Set([0, 1, Math.max(0, size - 1), size, size + 1, 1000])];
}

export function describeError(error: unknown): string {
  if (error instanceof CheckError) return error.message;
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}

/** Throws unless `ok`. */
export function check(ok: boolean, what: string, detail = 'failed'): void {
  if (!ok) throw new CheckError(`${what}: ${detail}`);
}

/** Throws unless `actual` has the class, length and values of `expected` (floats: a relative tolerance). */
export function checkArray(dtype: DType, actual: TypedArray, expected: TypedArray, what: string): void {
  const diff = compareArrays(dtype, actual, expected);
  if (diff !== undefined) throw new CheckError(`${what}: ${diff}`);
}

/** Throws unless the two are equal as JSON (shapes, plain values). */
export function checkJson(actual: unknown, expected: unknown, what: string): void {
  const a = JSON.stringify(actual, (_, v) => (typeof v === 'bigint' ? `${v}n` : v));
  const e = JSON.stringify(expected, (_, v) => (typeof v === 'bigint' ? `${v}n` : v));
  if (a !== e) throw new CheckError(`${what}: ${a} != ${e}`);
}

/** Runs one labelled part of a case: an error of the library it meets is reported under the label. */
export async function part(what: string, body: () => Promise<void>): Promise<void> {
  try {
    await body();
  } catch (error) {
    throw error instanceof CheckError ? error : new CheckError(`${what}: ${describeError(error)}`);
  }
}

/** Waits for every one of `promises` (so every collective has run), then throws what failed, if anything. */
export async function settleAll(promises: Iterable<Promise<unknown>>): Promise<void> {
  const settled = await Promise.allSettled(promises);
  const failed = settled.flatMap((s) => (s.status === 'rejected' ? [describeError(s.reason)] : []));
  if (failed.length === 0) return;
  const more = failed.length > 5 ? `; and ${failed.length - 5} more` : '';
  throw new CheckError(`${failed.slice(0, 5).join('; ')}${more}`);
}

/** The failure of case `c` on one rank, as the backends report it. */
export function failureOf(c: ConformanceCase, rank: number, size: number, error: unknown): string {
  return `${c.name} [rank ${rank} of ${size}]: ${describeError(error)}`;
}

/** What `call` threw or its promise rejected with, or undefined if it succeeded. */
export async function errorOf(call: () => unknown): Promise<unknown> {
  try {
    await call();
    return undefined;
  } catch (error) {
    return error;
  }
}

/** Throws unless `error` is a `kind` whose message is exactly `message`. */
export function checkError(error: unknown, kind: abstract new (...args: never[]) => Error, message: string, what: string): void {
  check(error !== undefined, what, `resolved instead of rejecting with ${kind.name}`);
  check(error instanceof kind, what, `rejected with ${describeError(error)}, not a ${kind.name}`);
  const actual = (error as Error).message;
  check(actual === message, what, `the message is "${actual}", not "${message}"`);
}

/**
 * A call refused at the call with InvalidArgumentError and exactly `message`: checked on the
 * calling rank only. Nothing reached the engine, so no other rank needs to make the call (and
 * none waits for this one); a case shows it by making the same name's proper call on every rank
 * afterwards.
 */
export async function checkRefused(what: string, message: string, call: () => unknown): Promise<void> {
  checkError(await errorOf(call), InvalidArgumentError, message, what);
}

/**
 * Every rank's `text`, in rank order: two allgathers (the lengths, then the bytes) named after
 * `name`. Every rank must call it. Mismatch cases use it to compare the messages ranks got.
 */
export async function textsOfEveryRank(rr: RingReduce, text: string, name: string): Promise<string[]> {
  const bytes = new TextEncoder().encode(text);
  const lengths = await rr.allgather(new Int32Array([bytes.length]), { name: `${name}/lengths` });
  const gathered = await rr.allgather(bytes, { name: `${name}/texts` });
  let offset = 0;
  return [...lengths].map((length) => {
    // A copy: results live in shared memory, which a browser's TextDecoder refuses.
    const decoded = new TextDecoder().decode(gathered.slice(offset, offset + length));
    offset += length;
    return decoded;
  });
}

/** `count` rows of `rowLength` elements from row `start` of a flat array (a view, not a copy). */
export function rowsOf<T extends TypedArray>(array: T, start: number, count: number, rowLength: number): T {
  return array.subarray(start * rowLength, (start + count) * rowLength) as T;
}
