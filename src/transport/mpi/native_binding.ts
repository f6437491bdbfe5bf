/**
 * The whole surface of the MPI addon (native/src/addon.cc), as TypeScript sees it. Only
 * loader.ts loads the addon; the rest of src/transport/mpi/ goes through these types.
 *
 * Threads: `init`, `finalize` and the Comm methods are called on the engine's worker thread.
 * Between `init` and `finalize`, every other MPI call runs on the Comm's progress thread
 * (native/src/progress_engine.h), and results come back as settled promises on the calling
 * thread's event loop.
 */
import type { DType, ReduceOp, TypedArray } from '../../core/types.js';

/** What `init()` learned about the job and the library. */
export interface MpiWorldInfo {
  readonly rank: number;
  readonly size: number;
  /** The thread level MPI provided (MPI_THREAD_SERIALIZED = 2 or more). */
  readonly threadLevel: number;
  /** MPI_TAG_UB: data tags are taken modulo tagUpperBound + 1. */
  readonly tagUpperBound: number;
  /** The first line of MPI_Get_library_version, e.g. "Open MPI v4.1.4, ...". */
  readonly library: string;
  /** The libmpi made global (RTLD_GLOBAL) before MPI_Init_thread, so MPI's plugins load. */
  readonly libraryPath: string;
}

export type MpiState = 'uninitialized' | 'initialized' | 'finalized';

/**
 * The `code` of an error a Comm promise rejects with:
 * - ETIMEDOUT: a send or receive passed its deadline (ioTimeoutMs from when it was posted);
 * - ETRUNCATED / ESHORT: a received message is longer / shorter than the buffer;
 * - EMPI: MPI returned an error (the message has MPI's error string);
 * - ECLOSED: the Comm was closed before the operation finished.
 */
export type NativeErrorCode = 'ETIMEDOUT' | 'ETRUNCATED' | 'ESHORT' | 'EMPI' | 'ECLOSED';

export interface NativeError extends Error {
  readonly code: NativeErrorCode;
}

export interface CommOptions {
  /** Deadline of each send and receive, from when it is posted. */
  ioTimeoutMs: number;
  /** A control message from `peer`, in the order that peer sent them. Must not throw. */
  onControl(peer: number, payload: Uint8Array): void;
  /** Receiving a control message from `peer` failed. Must not throw. */
  onLinkError(peer: number, message: string): void;
}

export interface CloseResult {
  /** Every rank reached the closing barrier and no MPI operation is in flight: MPI_Finalize is safe. */
  readonly clean: boolean;
  /** Why not, when not clean. */
  readonly reason: string;
}

/**
 * One set of communicators (duplicates of MPI_COMM_WORLD for data, control and collectives)
 * and the progress thread that drives them. The buffers passed in stay pinned until MPI is
 * done with them; the caller must not touch them before the promise settles.
 */
export interface NativeComm {
  /** MPI_Isend of `data` to `peer` under `tag` (0 .. tagUpperBound). */
  send(peer: number, tag: number, data: Uint8Array): Promise<void>;
  /** MPI_Irecv into `into`; rejects ESHORT / ETRUNCATED unless exactly `into.byteLength` bytes came. */
  recv(peer: number, tag: number, into: Uint8Array): Promise<void>;
  /** A variable-length message for the peer's onControl. */
  sendControl(peer: number, payload: Uint8Array): Promise<void>;
  /** MPI_Allreduce in place; 'average' (floats only) is MPI_SUM then a division by the size. */
  allreduce(buf: TypedArray, dtype: number, reduceOp: number): Promise<void>;
  /** allreduce of each of `bufs` (all of the dtype) in its own memory, in order, in one hand-off. */
  allreduceEach?(bufs: readonly TypedArray[], dtype: number, reduceOp: number): Promise<void>;
  /** MPI_Allgatherv in place: rank r's `counts[r]` elements at the sum of the counts before it. */
  allgatherv(buf: TypedArray, dtype: number, counts: readonly number[]): Promise<void>;
  /** MPI_Bcast from `root`. */
  bcast(buf: TypedArray, dtype: number, root: number): Promise<void>;
  // The collectives below are optional only so that a stand-in Comm (the unit tests' fake) may
  // leave them out; the addon has them all, and MpiCollectives.supports says no for a missing one.
  // Counts are in elements, one per rank, blocks back to back in rank order; their sum must be at
  // most 2^31-1 (MPI's int counts and displacements), else the call throws a RangeError (not for
  // reduceScatter, which runs in pieces). Arguments are checked with TypeError / RangeError.
  /**
   * MPI_Reduce_scatter (recvcounts = counts): `input` (the sum of counts) holds one block per
   * rank; `output` (counts[rank]) gets this rank's block reduced over the ranks. 'average'
   * (floats only) is MPI_SUM then a division by the size. `input` is only read. Beyond 2 MiB it
   * runs as several calls over windows of every block (any length).
   */
  reduceScatter?(
    input: TypedArray,
    output: TypedArray,
    dtype: number,
    counts: readonly number[],
    reduceOp: number,
  ): Promise<void>;
  /**
   * MPI_Alltoallv: `input` holds sendCounts[j] elements for rank j, `output` gets recvCounts[j]
   * from rank j, both in rank order (displacements: the running sums).
   */
  alltoallv?(
    input: TypedArray,
    output: TypedArray,
    dtype: number,
    sendCounts: readonly number[],
    recvCounts: readonly number[],
  ): Promise<void>;
  /**
   * MPI_Reduce to `root`, MPI_IN_PLACE there, in pieces of at most 2 MiB (any length); other
   * ranks' `buf` is only read. 'average' (floats only) divides at the root.
   */
  reduce?(buf: TypedArray, dtype: number, reduceOp: number, root: number): Promise<void>;
  /**
   * MPI_Gatherv to `root`: its `out` (the sum of counts) gets every rank's block, its own already
   * in place (MPI_IN_PLACE; its `input` is not used). Other ranks send `input` (counts[rank])
   * and may pass undefined as `out`.
   */
  gatherv?(
    input: TypedArray | undefined,
    out: TypedArray | undefined,
    dtype: number,
    counts: readonly number[],
    root: number,
  ): Promise<void>;
  /**
   * MPI_Scatterv from `root`: its `input` (the sum of counts) holds every block; every rank's
   * `output` (counts[rank]) gets its own. Other ranks may pass undefined as `input`. A root
   * whose `output` is its own block of `input` (a view of it) uses MPI_IN_PLACE.
   */
  scatterv?(
    input: TypedArray | undefined,
    output: TypedArray,
    dtype: number,
    counts: readonly number[],
    root: number,
  ): Promise<void>;
  /**
   * Rejects what is pending with ECLOSED, waits up to `timeoutMs` for MPI to give the buffers
   * back and for every rank to reach the same point (MPI_Ibarrier), then stops the progress
   * thread. Call once.
   */
  close(timeoutMs: number): Promise<CloseResult>;
}

export interface MpiBinding {
  /** Makes libmpi global, then MPI_Init_thread(MPI_THREAD_SERIALIZED). Idempotent; throws once finalised. */
  init(): MpiWorldInfo;
  /** MPI_Finalize. Call on the thread that called init(), after every Comm closed cleanly. */
  finalize(): void;
  state(): MpiState;
  /** Prints `message` on stderr and ends the whole MPI job (MPI_Abort). */
  abort(message: string, code: number): never;
  /** Collective over MPI_COMM_WORLD (it duplicates it): every rank constructs one at the same point. */
  Comm: new (
    options: CommOptions,
  ) => NativeComm;
  /** The addon's dtype codes: dtypes[code] is the dtype's name. */
  readonly dtypes: readonly string[];
  /** The addon's reduce-op codes: reduceOps[code] is the op's name. */
  readonly reduceOps: readonly string[];
}

/** The code tables the TypeScript side uses; loader.ts checks the addon agrees. */
export const kDTypeCodes: readonly DType[] = [
  'float32',
  'float64',
  'int8',
  'int16',
  'int32',
  'uint8',
  'uint16',
  'uint32',
  'int64',
  'uint64',
];
/**
 * The reduce ops the addon knows, by their code (native/src/types.h ReduceCode, exported as
 * `reduceOps`): kReduceOps' order, appended to in step with the addon. band/bor/bxor are
 * MPI_BAND/MPI_BOR/MPI_BXOR, for integer dtypes only.
 */
export const kReduceOpCodes: readonly ReduceOp[] = ['sum', 'average', 'min', 'max', 'product', 'band', 'bor', 'bxor'];
