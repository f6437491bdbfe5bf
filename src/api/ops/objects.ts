/**
 * allgatherObject and broadcastObject: any structured-clone value (what postMessage can send:
 * objects, arrays, Maps, typed arrays, ...) serialised with node:v8 and carried by the byte
 * collectives. allgather carries every rank's bytes behind an 8-byte length in one collective;
 * broadcast needs the length on every rank first, so it takes two.
 */
import { deserialize, serialize } from 'node:v8';
import { InvalidArgumentError } from '../../core/errors.js';
import type { ShapedTensor } from '../../core/types.js';
import { checkOptions, parseName, parseRoot } from '../tensor_args.js';

export interface AllgatherObjectOptions {
  name?: string;
}

export interface BroadcastObjectOptions {
  name?: string;
  /** The rank whose value every rank receives. Default 0. */
  root?: number;
}

/** The byte collectives the object ones are made of (a RingReduce). */
export interface ByteCollectives {
  rank(): number;
  size(): number;
  allgather(t: ShapedTensor<Uint8Array>, o: { name?: string }): Promise<ShapedTensor<Uint8Array>>;
  allgatherSync(t: ShapedTensor<Uint8Array>, o: { name?: string }): ShapedTensor<Uint8Array>;
  broadcast(t: Uint8Array, o: { name?: string; root: number }): Promise<Uint8Array>;
  broadcastSync(t: Uint8Array, o: { name?: string; root: number }): Uint8Array;
}

export async function allgatherObject(rr: ByteCollectives, value: unknown, options: unknown): Promise<unknown[]> {
  const { name, framed } = prepareGather(value, options);
  return unframe((await rr.allgather(framed, name === undefined ? {} : { name })).data, rr.size());
}

export function allgatherObjectSync(rr: ByteCollectives, value: unknown, options: unknown): unknown[] {
  const { name, framed } = prepareGather(value, options);
  return unframe(rr.allgatherSync(framed, name === undefined ? {} : { name }).data, rr.size());
}

export async function broadcastObject(rr: ByteCollectives, value: unknown, options: unknown): Promise<unknown> {
  const { root, names, bytes } = prepareBroadcast(rr, value, options);
  const length = await rr.broadcast(lengthOf(bytes), { ...names.length, root });
  return deserialize(await rr.broadcast(bytes ?? new Uint8Array(readLength(length)), { ...names.bytes, root }));
}

export function broadcastObjectSync(rr: ByteCollectives, value: unknown, options: unknown): unknown {
  const { root, names, bytes } = prepareBroadcast(rr, value, options);
  const length = rr.broadcastSync(lengthOf(bytes), { ...names.length, root });
  return deserialize(rr.broadcastSync(bytes ?? new Uint8Array(readLength(length)), { ...names.bytes, root }));
}

function serialized(value: unknown): Uint8Array {
  try {
    return serialize(value);
  } catch (error) {
    throw new InvalidArgumentError(`value cannot be sent (it must be structured-cloneable): ${(error as Error).message}`);
  }
}

/** This rank's bytes behind their length (8 bytes, little-endian), as one row per byte. */
function prepareGather(value: unknown, options: unknown): { name: string | undefined; framed: ShapedTensor<Uint8Array> } {
  const o = checkOptions(options, ['name']);
  const name = parseName(o.name);
  const bytes = serialized(value);
  const framed = new Uint8Array(8 + bytes.length);
  framed.set(lengthOf(bytes));
  framed.set(bytes, 8);
  return { name, framed: { data: framed, shape: [framed.length] } };
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
    values.push(deserialize(all.subarray(offset + 8, offset + 8 + length)));
    offset += 8 + length;
  }
  return values;
}

function prepareBroadcast(rr: ByteCollectives, value: unknown, options: unknown) {
  const o = checkOptions(options, ['name', 'root']);
  const name = parseName(o.name);
  const root = parseRoot(o.root, rr.size());
  // Named calls become two named collectives; unnamed ones two unnamed ones, in the same order on every rank.
  const names = {
    length: name === undefined ? {} : { name: `${name}/length` },
    bytes: name === undefined ? {} : { name: `${name}/bytes` },
  };
  return { root, names, bytes: rr.rank() === root ? serialized(value) : undefined };
}
