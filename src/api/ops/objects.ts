/**
 * allgatherObject and broadcastObject: any structured-clone value (objects, arrays, Maps, typed
 * arrays, ...: api/object_codec.ts says exactly what) encoded as bytes and carried by the byte
 * collectives. allgather carries every rank's bytes behind an 8-byte length in one collective;
 * broadcast needs the length on every rank first, so it takes two.
 */
import type { ShapedTensor } from '../../core/types.js';
import { decodeObject, encodeObject } from '../object_codec.js';
import { ProcessSet } from '../process_set.js';
import { checkOptions, parseName, parseRoot } from '../tensor_args.js';

/** Options of {@link RingReduce.allgatherObject} and {@link RingReduce.allgatherObjectSync}: the call's name and process set. */
export interface AllgatherObjectOptions {
  name?: string;
  processSet?: ProcessSet;
}

/** Options of {@link RingReduce.broadcastObject} and {@link RingReduce.broadcastObjectSync}: the root, the call's name and process set. */
export interface BroadcastObjectOptions {
  name?: string;
  processSet?: ProcessSet;
  /** The rank whose value every rank receives. Default 0. */
  root?: number;
}

/** The name and the process set of the byte collectives. */
type Scope = { name?: string; processSet?: ProcessSet };

/** The byte collectives the object ones are made of (a RingReduce). */
export interface ByteCollectives {
  rank(): number;
  size(): number;
  allgather(t: ShapedTensor<Uint8Array>, o: Scope): Promise<ShapedTensor<Uint8Array>>;
  allgatherSync(t: ShapedTensor<Uint8Array>, o: Scope): ShapedTensor<Uint8Array>;
  broadcast(t: Uint8Array, o: Scope & { root: number }): Promise<Uint8Array>;
  broadcastSync(t: Uint8Array, o: Scope & { root: number }): Uint8Array;
}

export async function allgatherObject(rr: ByteCollectives, value: unknown, options: unknown): Promise<unknown[]> {
  const { scope, size, framed } = prepareGather(rr, value, options);
  return unframe((await rr.allgather(framed, scope)).data, size);
}

export function allgatherObjectSync(rr: ByteCollectives, value: unknown, options: unknown): unknown[] {
  const { scope, size, framed } = prepareGather(rr, value, options);
  return unframe(rr.allgatherSync(framed, scope).data, size);
}

export async function broadcastObject(rr: ByteCollectives, value: unknown, options: unknown): Promise<unknown> {
  const { length, bytes, data } = prepareBroadcast(rr, value, options);
  const frame = await rr.broadcast(lengthOf(data), length);
  return decodeObject(await rr.broadcast(data ?? new Uint8Array(readLength(frame)), bytes));
}

export function broadcastObjectSync(rr: ByteCollectives, value: unknown, options: unknown): unknown {
  const { length, bytes, data } = prepareBroadcast(rr, value, options);
  const frame = rr.broadcastSync(lengthOf(data), length);
  return decodeObject(rr.broadcastSync(data ?? new Uint8Array(readLength(frame)), bytes));
}

/** The rank and size the collectives see: inside the process set when there is one. */
function where(rr: ByteCollectives, o: Record<string, unknown>): { scope: Scope; rank: number; size: number } {
  const set = o.processSet as ProcessSet | undefined;
  const scope: Scope = set === undefined ? {} : { processSet: set };
  // A set this rank is not in: the collective refuses it with the usual message.
  if (set instanceof ProcessSet && set.includes(rr.rank())) return { scope, rank: set.rank(), size: set.size() };
  return { scope, rank: rr.rank(), size: rr.size() };
}

/** This rank's bytes behind their length (8 bytes, little-endian), as one row per byte. */
function prepareGather(rr: ByteCollectives, value: unknown, options: unknown) {
  const o = checkOptions(options, ['name', 'processSet']);
  const name = parseName(o.name);
  const { scope, size } = where(rr, o);
  const bytes = encodeObject(value);
  const framed = new Uint8Array(8 + bytes.length);
  framed.set(lengthOf(bytes));
  framed.set(bytes, 8);
  return {
    scope: name === undefined ? scope : { ...scope, name },
    size,
    framed: { data: framed, shape: [framed.length] } as ShapedTensor<Uint8Array>,
  };
}

/** A byte length as 8 bytes (f64, little-endian); 0 on the ranks that only receive. */
function lengthOf(bytes: Uint8Array | undefined): Uint8Array {
  const frame = new Uint8Array(8);
  new DataView(frame.buffer).setFloat64(0, bytes?.length ?? 0, true);
  return frame;
}

function readLength(frame: Uint8Array): number {
  return new DataView(frame.buffer, frame.byteOffset, 8).getFloat64(0, true);
}

function unframe(all: Uint8Array, size: number): unknown[] {
  const values: unknown[] = [];
  let offset = 0;
  for (let rank = 0; rank < size; rank++) {
    const length = readLength(all.subarray(offset, offset + 8));
    values.push(decodeObject(all.subarray(offset + 8, offset + 8 + length)));
    offset += 8 + length;
  }
  return values;
}

function prepareBroadcast(rr: ByteCollectives, value: unknown, options: unknown) {
  const o = checkOptions(options, ['name', 'root', 'processSet']);
  const name = parseName(o.name);
  const { scope, rank, size } = where(rr, o);
  const root = parseRoot(o.root, size);
  // Named calls become two named collectives; unnamed ones two unnamed ones, in the same order on every rank.
  return {
    length: { ...scope, root, ...(name === undefined ? {} : { name: `${name}/length` }) },
    bytes: { ...scope, root, ...(name === undefined ? {} : { name: `${name}/bytes` }) },
    data: rank === root ? encodeObject(value) : undefined,
  };
}
