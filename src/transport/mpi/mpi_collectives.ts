/**
 * MPI's own collectives for the executor (NativeCollectives in ../transport.ts): MPI_Allreduce,
 * MPI_Allgatherv and MPI_Bcast, in place, every dtype mapped to its MPI type (int64/uint64 to
 * MPI_INT64_T/MPI_UINT64_T), 'average' as MPI_SUM then a division on the progress thread.
 *
 * Deadline: a blocking MPI collective cannot be left by one rank alone, so one that overruns
 * means another rank is not taking part (stopped, or stuck outside ringreduce) and every rank in
 * it is stuck for good. When the deadline passes (the I/O timeout plus 1 s per 10 MB), this
 * rank ends the whole MPI job with a message naming the collective: a clear failure instead of
 * a hang, and no thread left blocked in MPI.
 */
import { dtypeOf, isFloat } from '../../core/dtypes.js';
import { InvalidArgumentError } from '../../core/errors.js';
import type { DType, ReduceOp, TypedArray } from '../../core/types.js';
import type { NativeCollectives } from '../transport.js';
import { translateNativeError } from './mpi_errors.js';
import { kDTypeCodes, kReduceOpCodes, type MpiBinding, type MpiWorldInfo, type NativeComm } from './native_binding.js';

/** The slowest rate a collective may run at before its deadline counts as missed. */
const kMinBytesPerMs = 10_000;

function dtypeOfArray(buf: TypedArray): DType {
  const dtype = dtypeOf(buf);
  if (dtype === undefined) throw new InvalidArgumentError(`not a typed array ringreduce supports: ${buf.constructor.name}`);
  return dtype;
}

export class MpiCollectives implements NativeCollectives {
  constructor(
    private readonly binding: MpiBinding,
    private readonly comm: NativeComm,
    private readonly world: MpiWorldInfo,
    private readonly ioTimeoutMs: number,
  ) {}

  supports(_op: 'allreduce' | 'allgather' | 'broadcast', dtype: DType, reduceOp?: ReduceOp): boolean {
    return reduceOp !== 'average' || isFloat(dtype);
  }

  allreduce(buf: TypedArray, reduceOp: ReduceOp): Promise<void> {
    const dtype = dtypeOfArray(buf);
    return this.run(`allreduce (${reduceOp}) of ${buf.length} ${dtype}`, buf.byteLength, () =>
      this.comm.allreduce(buf, kDTypeCodes.indexOf(dtype), kReduceOpCodes.indexOf(reduceOp)),
    );
  }

  allgather(out: TypedArray, counts: readonly number[]): Promise<void> {
    const dtype = dtypeOfArray(out);
    return this.run(`allgather of ${out.length} ${dtype}`, out.byteLength, () =>
      this.comm.allgatherv(out, kDTypeCodes.indexOf(dtype), counts),
    );
  }

  broadcast(buf: TypedArray, root: number): Promise<void> {
    const dtype = dtypeOfArray(buf);
    return this.run(`broadcast from rank ${root} of ${buf.length} ${dtype}`, buf.byteLength, () =>
      this.comm.bcast(buf, kDTypeCodes.indexOf(dtype), root),
    );
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
