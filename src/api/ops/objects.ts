/**
 * allgatherObject, broadcastObject, gatherObject and scatterObject: any structured-clone value
 * (objects, arrays, Maps, typed arrays, ...: api/object_codec.ts says exactly what) encoded as
 * bytes and carried by the byte collectives, as torch.distributed builds its object collectives
 * on gather and scatter of pickled bytes. allgather and gather carry every rank's bytes behind an
 * 8-byte length in one collective (the first dimension may differ per rank); scatter carries the
 * root's values in one collective too, its splits being their byte lengths; broadcast needs the
 * length on every rank first, so it takes two.
 */
import { InvalidArgumentError } from '../../core/errors.js';
import type { ShapedTensor } from '../../core/types.js';
import { decodeObject, encodeObject } from '../object_codec.js';
import { ProcessSet } from '../process_set.js';
import { checkOptions, parseName, parseRoot } from '../tensor_args.js';

/** Options of {@link RingReduce.allgatherObject} and {@link RingReduce.allgatherObjectSync}: the call's name and process set. */
export interface AllgatherObjectOptions {
  name?: string;
  processSet?: ProcessSet;
  /**
   * How long every rank (of the set) has, from the first one's submission, to submit this
   * collective: past it, every rank that did rejects with the same TimeoutError naming those that
   * did not, and the job goes on. Pass the same on every rank. Default: the job's stall timeout.
   */
  timeoutMs?: number;
}

/** Options of {@link RingReduce.broadcastObject} and {@link RingReduce.broadcastObjectSync}: the root, the call's name and process set. */
export interface BroadcastObjectOptions {
  name?: string;
  processSet?: ProcessSet;
  /**
   * How long every rank (of the set) has, from the first one's submission, to submit this
   * collective: past it, every rank that did rejects with the same TimeoutError naming those that
   * did not, and the job goes on. Pass the same on every rank. Default: the job's stall timeout.
   */
  timeoutMs?: number;
  /** The rank whose value every rank receives. Default 0. */
  root?: number;
}

/** The options of gatherObject. */
export interface GatherObjectOptions {
  /** Identifies the call across ranks, the same on every rank (default: its order among unnamed gathers). */
  name?: string;
  /** Run in this process set (ranks and root inside it). Default: the whole job. */
  processSet?: ProcessSet;
  /**
   * How long every rank (of the set) has, from the first one's submission, to submit this
   * collective: past it, every rank that did rejects with the same TimeoutError naming those that
   * did not, and the job goes on. Pass the same on every rank. Default: the job's stall timeout.
   */
  timeoutMs?: number;
  /** The rank that receives every rank's value. Default 0. */
  root?: number;
}

/** The options of scatterObject. */
export interface ScatterObjectOptions {
  /** Identifies the call across ranks, the same on every rank (default: its order among unnamed scatters). */
  name?: string;
  /** Run in this process set (one value per member, ranks and root inside it). Default: the whole job. */
  processSet?: ProcessSet;
  /**
   * How long every rank (of the set) has, from the first one's submission, to submit this
   * collective: past it, every rank that did rejects with the same TimeoutError naming those that
   * did not, and the job goes on. Pass the same on every rank. Default: the job's stall timeout.
   */
  timeoutMs?: number;
  /** The rank whose values are scattered. Default 0. */
  root?: number;
}

/** The name and the process set of the byte collectives. */
type Scope = { name?: string; processSet?: ProcessSet; timeoutMs?: number };

/** The byte collectives the object ones are made of (a RingReduce). */
export interface ByteCollectives {
  rank(): number;
  size(): number;
  allgather(t: ShapedTensor<Uint8Array>, o: Scope): Promise<ShapedTensor<Uint8Array>>;
  allgatherSync(t: ShapedTensor<Uint8Array>, o: Scope): ShapedTensor<Uint8Array>;
  broadcast(t: Uint8Array, o: Scope & { root: number }): Promise<Uint8Array>;
  broadcastSync(t: Uint8Array, o: Scope & { root: number }): Uint8Array;
  gather(t: ShapedTensor<Uint8Array>, o: Scope & { root: number }): Promise<ShapedTensor<Uint8Array> | null>;
  gatherSync(t: ShapedTensor<Uint8Array>, o: Scope & { root: number }): ShapedTensor<Uint8Array> | null;
  scatter(t: ShapedTensor<Uint8Array> | null, o: Scope & { root: number; splits?: number[] }): Promise<ShapedTensor>;
  scatterSync(t: ShapedTensor<Uint8Array> | null, o: Scope & { root: number; splits?: number[] }): ShapedTensor;
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

export async function gatherObject(rr: ByteCollectives, value: unknown, options: unknown): Promise<unknown[] | null> {
  const { scope, size, framed } = prepareRootedGather(rr, value, options);
  const all = await rr.gather(framed, scope);
  return all === null ? null : unframe(all.data, size);
}

export function gatherObjectSync(rr: ByteCollectives, value: unknown, options: unknown): unknown[] | null {
  const { scope, size, framed } = prepareRootedGather(rr, value, options);
  const all = rr.gatherSync(framed, scope);
  return all === null ? null : unframe(all.data, size);
}

export async function scatterObject(rr: ByteCollectives, values: unknown, options: unknown): Promise<unknown> {
  const { scope, bytes } = prepareScatter(rr, values, options);
  return decodeObject((await rr.scatter(bytes, scope)).data as Uint8Array);
}

export function scatterObjectSync(rr: ByteCollectives, values: unknown, options: unknown): unknown {
  const { scope, bytes } = prepareScatter(rr, values, options);
  return decodeObject(rr.scatterSync(bytes, scope).data as Uint8Array);
}

/** The rank and size the collectives see: inside the process set when there is one. */
function where(rr: ByteCollectives, o: Record<string, unknown>): { scope: Scope; rank: number; size: number } {
  const set = o.processSet as ProcessSet | undefined;
  const scope: Scope = set === undefined ? {} : { processSet: set };
  // Checked by the collectives it is passed to.
  if (o.timeoutMs !== undefined) scope.timeoutMs = o.timeoutMs as number;
  // A set this rank is not in: the collective refuses it with the usual message.
  if (set instanceof ProcessSet && set.includes(rr.rank())) return { scope, rank: set.rank(), size: set.size() };
  return { scope, rank: rr.rank(), size: rr.size() };
}

/** This rank's bytes behind their length (8 bytes, little-endian), as one row per byte. */
function prepareGather(rr: ByteCollectives, value: unknown, options: unknown) {
  const o = checkOptions(options, ['name', 'processSet', 'timeoutMs']);
  const name = parseName(o.name);
  const { scope, size } = where(rr, o);
  return { scope: name === undefined ? scope : { ...scope, name }, size, framed: framedBytes(value) };
}

/** gatherObject: as allgatherObject's, with the root. */
function prepareRootedGather(rr: ByteCollectives, value: unknown, options: unknown) {
  const o = checkOptions(options, ['name', 'root', 'processSet', 'timeoutMs']);
  const name = parseName(o.name);
  const { scope, size } = where(rr, o);
  const root = parseRoot(o.root, size);
  return { scope: { ...scope, root, ...(name === undefined ? {} : { name }) }, size, framed: framedBytes(value) };
}

function framedBytes(value: unknown): ShapedTensor<Uint8Array> {
  const bytes = encodeObject(value);
  const framed = new Uint8Array(8 + bytes.length);
  framed.set(lengthOf(bytes));
  framed.set(bytes, 8);
  return { data: framed, shape: [framed.length] };
}

/**
 * scatterObject: on the root, its values' bytes end to end, split by their lengths (one value per
 * rank); elsewhere nothing: the others' `values` are ignored, as torch ignores them (and as
 * broadcastObject ignores the others' value).
 */
function prepareScatter(rr: ByteCollectives, values: unknown, options: unknown) {
  const o = checkOptions(options, ['name', 'root', 'processSet', 'timeoutMs']);
  const name = parseName(o.name);
  const { scope, rank, size } = where(rr, o);
  const root = parseRoot(o.root, size);
  const common = { ...scope, root, ...(name === undefined ? {} : { name }) };
  if (rank !== root) return { scope: common, bytes: null };
  if (!Array.isArray(values) || values.length !== size) {
    const got = Array.isArray(values) ? `an array of ${values.length}` : describeValue(values);
    throw new InvalidArgumentError(
      `scatterObject: values must be an array of ${size} values on the root (rank ${root}), one for each rank, got ${got}`,
    );
  }
  const encoded = values.map((value, i) => encodeObject(value, `values[${i}]`));
  const data = new Uint8Array(encoded.reduce((total, bytes) => total + bytes.length, 0));
  let offset = 0;
  for (const bytes of encoded) {
    data.set(bytes, offset);
    offset += bytes.length;
  }
  return {
    scope: { ...common, splits: encoded.map((bytes) => bytes.length) },
    bytes: { data, shape: [data.length] } as ShapedTensor<Uint8Array>,
  };
}

function describeValue(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  return typeof value === 'object' ? ((value as object).constructor?.name ?? 'object') : typeof value;
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
  const o = checkOptions(options, ['name', 'root', 'processSet', 'timeoutMs']);
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
