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
  /** MPI_Allgatherv in place: rank r's `counts[r]` elements at the sum of the counts before it. */
  allgatherv(buf: TypedArray, dtype: number, counts: readonly number[]): Promise<void>;
  /** MPI_Bcast from `root`. */
  bcast(buf: TypedArray, dtype: number, root: number): Promise<void>;
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
export const kReduceOpCodes: readonly ReduceOp[] = ['sum', 'average', 'min', 'max', 'product'];
