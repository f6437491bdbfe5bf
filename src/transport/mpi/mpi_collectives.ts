/**
 * MPI's own collectives for the executor (NativeCollectives in ../transport.ts), every dtype
 * mapped to its MPI type (int64/uint64 to MPI_INT64_T/MPI_UINT64_T):
 *
 * | collective    | MPI call                                                                 |
 * |---------------|--------------------------------------------------------------------------|
 * | allreduce     | MPI_Allreduce(MPI_IN_PLACE), in pieces of at most 2 MiB                  |
 * | allreduceEach | the same for each of several buffers, in order, in one hand-off          |
 * | allgather     | MPI_Allgatherv(MPI_IN_PLACE)                                             |
 * | broadcast     | MPI_Bcast                                                                |
 * | reducescatter | MPI_Reduce_scatter, recvcounts = counts, in pieces of at most 2 MiB      |
 * | alltoall      | MPI_Alltoallv, displacements = the running sums of the counts            |
 * | reduce        | MPI_Reduce, MPI_IN_PLACE at the root, in pieces of at most 2 MiB         |
 * | gather        | MPI_Gatherv, MPI_IN_PLACE at the root (its block is already in `out`)    |
 * | scatter       | MPI_Scatterv (MPI_IN_PLACE at a root whose output is its block of input) |
 *
 * Reduce ops: sum, min, max, product, band, bor, bxor are MPI_SUM ... MPI_BXOR (8- and 16-bit
 * sums use the addon's wrapping op, see native/src/types.h); 'average' is MPI_SUM then a
 * division on the progress thread (at the root for reduce). `supports` says no where MPI cannot
 * do it ('average' on integers, band/bor/bxor on floats), so the engine runs its own algorithm.
 *
 * Counts: MPI counts and displacements are C ints. allreduce, reduce, reducescatter and
 * broadcast run as several MPI calls when needed (any length); allgather, alltoall, gather and
 * scatter refuse, with an InvalidArgumentError, counts that add up to more than 2^31-1 elements
 * (per side for alltoall): MPI_*v take int displacements, which one call cannot go beyond.
 *
 * Deadline: a blocking MPI collective cannot be left by one rank alone, so one that overruns
 * means another rank is not taking part (stopped, or stuck outside ringreduce) and every rank in
 * it is stuck for good. When the deadline passes (the I/O timeout plus 1 s per 10 MB), this
 * rank ends the whole MPI job with a message naming the collective: a clear failure instead of
 * a hang, and no thread left blocked in MPI.
 */
import { callerDTypeOf, isFloat } from '../../core/dtypes.js';
import { InvalidArgumentError } from '../../core/errors.js';
import type { DType, ReduceOp, TypedArray, WireDType } from '../../core/types.js';
import type { NativeCollectives, NativeOp } from '../transport.js';
import { translateNativeError } from './mpi_errors.js';
import { kDTypeCodes, kReduceOpCodes, type MpiBinding, type MpiWorldInfo, type NativeComm } from './native_binding.js';

/** The slowest rate a collective may run at before its deadline counts as missed. */
const kMinBytesPerMs = 10_000;

/** MPI's counts and displacements are C ints. */
const kMaxMpiCount = 2 ** 31 - 1;

/** The Comm method behind each collective. */
const kCommMethod: Record<NativeOp, keyof NativeComm> = {
  allreduce: 'allreduce',
  allgather: 'allgatherv',
  broadcast: 'bcast',
  reducescatter: 'reduceScatter',
  alltoall: 'alltoallv',
  reduce: 'reduce',
  gather: 'gatherv',
  scatter: 'scatterv',
};

const kReducing: ReadonlySet<NativeOp> = new Set<NativeOp>(['allreduce', 'reducescatter', 'reduce']);
const kBitwise: ReadonlySet<string> = new Set(['band', 'bor', 'bxor']);

/** MPI knows the callers' dtypes only: supports() keeps the wire's float16 on the ring. */
function dtypeOfArray(buf: TypedArray): DType {
  const dtype = callerDTypeOf(buf);
  if (dtype === undefined) throw new InvalidArgumentError(`not a typed array ringreduce supports: ${buf.constructor.name}`);
  return dtype;
}

function sum(counts: readonly number[]): number {
  return counts.reduce((a, b) => a + b, 0);
}

/** The elements a collective moves, for its name and deadline (0 for counts checkCounts will refuse). */
function totalOf(counts: readonly number[]): number {
  const total = Array.isArray(counts) ? sum(counts) : 0;
  return Number.isSafeInteger(total) ? total : 0;
}

export class MpiCollectives implements NativeCollectives {
  /** Absent when the addon predates it (built by an older version): the engine packs instead. */
  readonly allreduceEach?: (bufs: readonly TypedArray[], reduceOp: ReduceOp) => Promise<void>;

  constructor(
    private readonly binding: MpiBinding,
    private readonly comm: NativeComm,
    private readonly world: MpiWorldInfo,
    private readonly ioTimeoutMs: number,
  ) {
    if (typeof comm.allreduceEach === 'function') this.allreduceEach = (bufs, reduceOp) => this.reduceEach(bufs, reduceOp);
  }

  supports(op: NativeOp, dtype: WireDType, reduceOp?: ReduceOp): boolean {
    if (typeof this.comm[kCommMethod[op]] !== 'function') return false;
    // fp16 compression's wire dtype has no MPI datatype (nor a float32-accumulating MPI_Op).
    if (!(kDTypeCodes as readonly WireDType[]).includes(dtype)) return false;
    if (reduceOp === undefined || !kReducing.has(op)) return true;
    if (!kReduceOpCodes.includes(reduceOp)) return false;
    if (reduceOp === 'average') return isFloat(dtype);
    if (kBitwise.has(reduceOp)) return !isFloat(dtype);
    return true;
  }

  allreduce(buf: TypedArray, reduceOp: ReduceOp): Promise<void> {
    const dtype = dtypeOfArray(buf);
    return this.run(`allreduce (${reduceOp}) of ${buf.length} ${dtype}`, buf.byteLength, () => {
      this.checkReduceOp('allreduce', dtype, reduceOp);
      return this.comm.allreduce(buf, kDTypeCodes.indexOf(dtype), kReduceOpCodes.indexOf(reduceOp));
    });
  }

  private reduceEach(bufs: readonly TypedArray[], reduceOp: ReduceOp): Promise<void> {
    const first = bufs[0];
    if (first === undefined) return Promise.resolve();
    const dtype = dtypeOfArray(first);
    const bytes = bufs.reduce((n, buf) => n + buf.byteLength, 0);
    return this.run(`allreduce (${reduceOp}) of ${bufs.length} ${dtype} tensors`, bytes, () => {
      this.checkReduceOp('allreduce', dtype, reduceOp);
      if (bufs.some((buf) => callerDTypeOf(buf) !== dtype)) {
        throw new InvalidArgumentError(`allreduceEach: every tensor must be ${dtype}`);
      }
      return this.method('allreduceEach')(bufs, kDTypeCodes.indexOf(dtype), kReduceOpCodes.indexOf(reduceOp));
    });
  }

  allgather(out: TypedArray, counts: readonly number[]): Promise<void> {
    const dtype = dtypeOfArray(out);
    return this.run(`allgather of ${out.length} ${dtype}`, out.byteLength, () => {
      this.checkCounts('allgather', counts, 'counts');
      return this.comm.allgatherv(out, kDTypeCodes.indexOf(dtype), counts);
    });
  }

  broadcast(buf: TypedArray, root: number): Promise<void> {
    const dtype = dtypeOfArray(buf);
    return this.run(`broadcast from rank ${root} of ${buf.length} ${dtype}`, buf.byteLength, () =>
      this.comm.bcast(buf, kDTypeCodes.indexOf(dtype), root),
    );
  }

  reducescatter(input: TypedArray, output: TypedArray, counts: readonly number[], reduceOp: ReduceOp): Promise<void> {
    const dtype = dtypeOfArray(input);
    return this.run(`reducescatter (${reduceOp}) of ${input.length} ${dtype}`, input.byteLength, () => {
      this.checkReduceOp('reducescatter', dtype, reduceOp);
      this.checkCounts('reducescatter', counts, 'counts', Number.MAX_SAFE_INTEGER);
      return this.method('reduceScatter')(input, output, kDTypeCodes.indexOf(dtype), counts, kReduceOpCodes.indexOf(reduceOp));
    });
  }

  alltoall(input: TypedArray, sendCounts: readonly number[], output: TypedArray, recvCounts: readonly number[]): Promise<void> {
    const dtype = dtypeOfArray(input);
    const what = `alltoall of ${input.length} ${dtype} (receiving ${output.length})`;
    return this.run(what, input.byteLength + output.byteLength, () => {
      this.checkCounts('alltoall', sendCounts, 'sendCounts');
      this.checkCounts('alltoall', recvCounts, 'recvCounts');
      return this.method('alltoallv')(input, output, kDTypeCodes.indexOf(dtype), sendCounts, recvCounts);
    });
  }

  reduce(buf: TypedArray, reduceOp: ReduceOp, root: number): Promise<void> {
    const dtype = dtypeOfArray(buf);
    return this.run(`reduce (${reduceOp}) to rank ${root} of ${buf.length} ${dtype}`, buf.byteLength, () => {
      this.checkReduceOp('reduce', dtype, reduceOp);
      return this.method('reduce')(buf, kDTypeCodes.indexOf(dtype), kReduceOpCodes.indexOf(reduceOp), root);
    });
  }

  gather(input: TypedArray, out: TypedArray | undefined, counts: readonly number[], root: number): Promise<void> {
    const dtype = dtypeOfArray(out ?? input);
    const total = totalOf(counts);
    return this.run(`gather to rank ${root} of ${total} ${dtype}`, total * (out ?? input).BYTES_PER_ELEMENT, () => {
      this.checkCounts('gather', counts, 'counts');
      return this.method('gatherv')(input, out, kDTypeCodes.indexOf(dtype), counts, root);
    });
  }

  scatter(input: TypedArray | undefined, output: TypedArray, counts: readonly number[], root: number): Promise<void> {
    const dtype = dtypeOfArray(output);
    const total = totalOf(counts);
    return this.run(`scatter from rank ${root} of ${total} ${dtype}`, total * output.BYTES_PER_ELEMENT, () => {
      this.checkCounts('scatter', counts, 'counts');
      return this.method('scatterv')(input, output, kDTypeCodes.indexOf(dtype), counts, root);
    });
  }

  /** A reduce op MPI cannot apply to the dtype is refused here, in the engine's words. */
  private checkReduceOp(op: NativeOp, dtype: DType, reduceOp: ReduceOp): void {
    if (this.supports(op, dtype, reduceOp)) return;
    if (reduceOp === 'average') throw new InvalidArgumentError(`op 'average' needs a float dtype, got ${dtype}`);
    if (kBitwise.has(reduceOp)) throw new InvalidArgumentError(`op '${reduceOp}' needs an integer dtype, got ${dtype}`);
    throw new InvalidArgumentError(`op '${reduceOp}' is not one the MPI addon knows (${kReduceOpCodes.join(', ')})`);
  }

  /**
   * One count per rank, each a non-negative integer, adding up to at most `limit`: by default
   * what MPI's int counts and displacements can express (larger v-collectives are refused, not
   * split; the reduce-scatter is split by the addon, so it has no such limit).
   */
  private checkCounts(op: NativeOp, counts: readonly number[], name: string, limit = kMaxMpiCount): void {
    const { size } = this.world;
    if (!Array.isArray(counts) || counts.length !== size) {
      const got = Array.isArray(counts) ? `${counts.length}` : typeof counts;
      throw new InvalidArgumentError(`${name} must have one count per rank (${size}), got ${got}`);
    }
    if (!counts.every((c) => Number.isSafeInteger(c) && c >= 0)) {
      throw new InvalidArgumentError(`${name} must be non-negative integers, got [${counts.join(', ')}]`);
    }
    const total = sum(counts);
    if (total > limit) {
      throw new InvalidArgumentError(
        `${name} add up to ${total} elements: the MPI ${op} is limited to 2^31-1 elements (MPI's int counts and displacements); ` +
          'split the tensor, or use the TCP backend',
      );
    }
  }

  /** A Comm method this build has (the addon has them all; supports() says no for a missing one). */
  private method<K extends 'allreduceEach' | 'reduceScatter' | 'alltoallv' | 'reduce' | 'gatherv' | 'scatterv'>(
    name: K,
  ): NonNullable<NativeComm[K]> {
    const fn = this.comm[name];
    if (typeof fn !== 'function') {
      throw new InvalidArgumentError(`this MPI addon has no ${name}: rebuild it (node scripts/build-native.mjs)`);
    }
    return fn.bind(this.comm) as NonNullable<NativeComm[K]>;
  }

  private async run(what: string, bytes: number, go: () => Promise<void>): Promise<void> {
    const deadlineMs = this.ioTimeoutMs + Math.ceil(bytes / kMinBytesPerMs);
    const { rank, size } = this.world;
    const timer = setTimeout(() => {
      this.binding.abort(
        `rank ${rank} of ${size}: the MPI ${what} did not finish within ${deadlineMs} ms: another rank is not taking part ` +
          '(it stopped, or is stuck outside ringreduce). An MPI collective cannot be left alone, so the job ends here.',
        1,
      );
    }, deadlineMs);
    try {
      await go();
    } catch (error) {
      throw translateNativeError(error, { what: `MPI ${what}`, ioTimeoutMs: this.ioTimeoutMs });
    } finally {
      clearTimeout(timer);
    }
  }
}
