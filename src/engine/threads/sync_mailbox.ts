/**
 * The completion of a ...Sync call in shared memory, for a caller that cannot take messages off
 * its port while it blocks: a browser has no receiveMessageOnPort, and a thread asleep in
 * Atomics.wait runs no event loop. (Node's caller drains its port instead; it has no mailbox.)
 *
 * How it works. The caller's thread makes one growable SharedArrayBuffer and hands it to the
 * engine with the init data. A ...Sync call marks its submission `sync`. When the engine
 * settles the newest such submission, it writes the completion here instead of posting it: a
 * JSON record (shape, counts, the dtype of an output the engine allocated, or the error) and the
 * output's bytes (allgather, gather, alltoall, reducescatter and scatter without `out` get
 * their output from the engine), growing the buffer when they do not fit; then it stores the
 * call's id in the header's `ready` word and, as for any completion, bumps the signal the
 * caller sleeps on. The caller reads the record once `ready` holds its id, copies the output
 * into fresh shared memory, and clears `ready`.
 *
 * Why no lock: only the newest sync submission is written here (an older one, whose caller
 * gave up waiting, is posted as usual), and the caller makes no newer one before it has read
 * this one; so the engine never writes while the caller reads. Atomics.store of `ready` after
 * the plain writes and Atomics.load before the plain reads order them.
 *
 * Layout: a header of Int32 words (below), the JSON record from kHeaderBytes, the output from
 * the next multiple of 8.
 */
import { allocShared, bytesPerElement, dtypeOf } from '../../core/dtypes.js';
import { type ErrorRecord, RingReduceError, toErrorRecord } from '../../core/errors.js';
import type { TypedArray, WireDType } from '../../core/types.js';
import type { FromEngine } from './worker_protocol.js';

/** The header's words. */
const kReady = 0;
const kKind = 1;
const kRecordBytes = 2;
const kOutputBytes = 3;
const kState = 4;
const kHeaderBytes = 64;

const kDone = 1;
const kFailed = 2;
/** kState: the engine has stopped (closed, failed to start, crashed): no completion will come. */
const kStopped = 1;

/** How large the mailbox may grow: address space reserved, not memory used (a 32-bit browser gets less, see createSyncMailbox). */
export const kMailboxMaxBytes = 2 ** 30;

/** A growable SharedArrayBuffer (ES2024: Node 20, Chromium 111), which the project's ES2022 lib does not type. */
interface GrowableShared extends SharedArrayBuffer {
  grow(byteLength: number): void;
  readonly maxByteLength: number;
}
type GrowableConstructor = new (byteLength: number, options: { maxByteLength: number }) => GrowableShared;

/** A completion that settles a call (what a mailbox carries). */
export type Settlement = Extract<FromEngine, { type: 'done' } | { type: 'failed' }>;

interface SettlementRecord {
  shape?: number[];
  counts?: number[];
  /** The dtype of the output whose bytes follow. */
  dtype?: WireDType;
  error?: ErrorRecord;
}

/**
 * A mailbox that may grow to `maxBytes`. Where the address space for that is refused (a 32-bit
 * browser), smaller reservations are tried, down to 64 MiB.
 */
export function createSyncMailbox(maxBytes = kMailboxMaxBytes): SharedArrayBuffer {
  const Growable = SharedArrayBuffer as unknown as GrowableConstructor;
  for (let max = maxBytes; ; max /= 4) {
    try {
      return new Growable(kHeaderBytes + 4096, { maxByteLength: max });
    } catch (error) {
      if (max <= 64 * 1024 * 1024) throw error;
    }
  }
}

function outputOffset(recordBytes: number): number {
  return Math.ceil((kHeaderBytes + recordBytes) / 8) * 8;
}

/** The engine's side. */
export class SyncMailboxWriter {
  private readonly header: Int32Array;
  private readonly encoder = new TextEncoder();

  constructor(private readonly buffer: SharedArrayBuffer) {
    this.header = new Int32Array(buffer, 0, kHeaderBytes / 4);
  }

  /** Writes `message` for its caller (the caller is woken by the signal's bump, not here). */
  write(message: Settlement): void {
    try {
      this.put(message);
    } catch (error) {
      // An output past the mailbox's largest size: the call fails on this rank, saying why.
      this.put({ type: 'failed', id: message.id, error: toErrorRecord(error) });
    }
  }

  /** No completion will come any more: a caller that waits gives up at once. */
  stop(): void {
    Atomics.store(this.header, kState, kStopped);
  }

  private put(message: Settlement): void {
    const record: SettlementRecord = {};
    let output: TypedArray | undefined;
    if (message.type === 'failed') record.error = message.error;
    else {
      if (message.shape) record.shape = message.shape;
      if (message.counts) record.counts = message.counts;
      output = message.output;
      if (output) record.dtype = dtypeOf(output);
    }
    const json = this.encoder.encode(JSON.stringify(record));
    const at = outputOffset(json.byteLength);
    const bytes = output ? new Uint8Array(output.buffer, output.byteOffset, output.byteLength) : undefined;
    this.ensure(at + (bytes?.byteLength ?? 0), message.id);
    new Uint8Array(this.buffer, kHeaderBytes, json.byteLength).set(json);
    if (bytes) new Uint8Array(this.buffer, at, bytes.byteLength).set(bytes);
    this.header[kKind] = message.type === 'done' ? kDone : kFailed;
    this.header[kRecordBytes] = json.byteLength;
    this.header[kOutputBytes] = bytes?.byteLength ?? 0;
    Atomics.store(this.header, kReady, message.id);
  }

  private ensure(bytes: number, id: number): void {
    const buffer = this.buffer as GrowableShared;
    if (buffer.byteLength >= bytes) return;
    if (bytes > buffer.maxByteLength) {
      throw new RingReduceError(
        `call ${id}: its result of ${bytes} bytes is larger than a ...Sync call can take in a browser (${buffer.maxByteLength} bytes): use the async call`,
      );
    }
    // Doubling: a loop of growing results grows the buffer a few times, not once per call.
    buffer.grow(Math.min(buffer.maxByteLength, Math.max(bytes, 2 * buffer.byteLength)));
  }
}

/** The caller's side. */
export class SyncMailboxReader {
  private readonly header: Int32Array;
  private readonly decoder = new TextDecoder();

  constructor(private readonly buffer: SharedArrayBuffer) {
    this.header = new Int32Array(buffer, 0, kHeaderBytes / 4);
  }

  /**
   * The completion of call `id` once the engine has written it (taken: it is returned once),
   * `{ type: 'closed' }` once the engine has stopped without writing it, else undefined.
   */
  take(id: number): Settlement | { type: 'closed' } | undefined {
    if (Atomics.load(this.header, kReady) !== id) {
      return Atomics.load(this.header, kState) === kStopped ? { type: 'closed' } : undefined;
    }
    const recordBytes = this.header[kRecordBytes] as number;
    const outputBytes = this.header[kOutputBytes] as number;
    // A copy: a browser's TextDecoder refuses views of shared memory.
    const json = new Uint8Array(this.buffer, kHeaderBytes, recordBytes).slice();
    const record = JSON.parse(this.decoder.decode(json)) as SettlementRecord;
    let settlement: Settlement;
    if (this.header[kKind] === kFailed) {
      settlement = { type: 'failed', id, error: record.error as ErrorRecord };
    } else {
      settlement = { type: 'done', id };
      if (record.shape) settlement.shape = record.shape;
      if (record.counts) settlement.counts = record.counts;
      if (record.dtype) {
        const output = allocShared(record.dtype, outputBytes / bytesPerElement(record.dtype));
        new Uint8Array(output.buffer, output.byteOffset, outputBytes).set(
          new Uint8Array(this.buffer, outputOffset(recordBytes), outputBytes),
        );
        settlement.output = output;
      }
    }
    Atomics.store(this.header, kReady, 0);
    return settlement;
  }
}
