/**
 * The bytes of allgatherObject and broadcastObject: MessagePack with msgpackr's structured-clone
 * extensions, the same bytes on a Node rank and a browser rank (node:v8's serializer, used
 * before, exists on Node only and its format is V8's own), so a job that mixes them agrees.
 *
 * What travels: what structured clone carries, with object identity (shared references and
 * cycles): plain objects, arrays, Map, Set, Date, RegExp, Error, typed arrays, ArrayBuffer,
 * DataView, bigints of any size up to about 1000 bits (msgpackr's BigInt extension), undefined
 * (also inside objects and arrays), NaN and the infinities. Unlike structured clone: -0 arrives
 * as 0 (MessagePack has one integer zero; typed arrays keep -0), holes in arrays arrive as
 * undefined, a class instance or another object (WeakMap, Promise, Boolean) arrives as a plain
 * object of its own enumerable fields, a toJSON is not called. Functions and symbols are refused,
 * naming where they are in the value.
 */
import { Packr } from 'msgpackr';
import { InvalidArgumentError } from '../core/errors.js';

const kOptions = {
  structuredClone: true,
  useBigIntExtension: true,
  // Structured clone ignores toJSON; so does this codec, and a class instance travels as its fields.
  useToJSON: false,
  writeFunction: (): never => {
    throw new TypeError('a function');
  },
} as const;

/** `value` as bytes; `argName` names it in the error for what cannot be sent. */
export function encodeObject(value: unknown, argName = 'value'): Uint8Array {
  let packed: Uint8Array;
  try {
    // One Packr per call: it keeps the record shapes of the value it packs, nothing that outlives the call.
    packed = new Packr(kOptions).pack(value);
  } catch (error) {
    const where = unsendable(value, argName);
    const what = where ?? `${argName} (${(error as Error).message})`;
    throw new InvalidArgumentError(
      `${argName} cannot be sent: ${what}; object collectives carry structured-clone values, without functions or symbols`,
    );
  }
  // msgpackr returns a view of a buffer it reuses for the next value it packs: this copy is the caller's.
  return packed.slice();
}

/** The value `bytes` hold (any view: a shared one is copied first, as a browser's TextDecoder refuses those). */
export function decodeObject(bytes: Uint8Array): unknown {
  const own = bytes.buffer instanceof ArrayBuffer ? bytes : bytes.slice();
  return new Packr(kOptions).unpack(own);
}

/** Where the first function or symbol in `value` is, as "value.a[2] is a symbol"; undefined if none. */
function unsendable(value: unknown, path: string, seen = new Set<object>()): string | undefined {
  if (typeof value === 'function') return `${path} is a function`;
  if (typeof value === 'symbol') return `${path} is a symbol`;
  if (typeof value !== 'object' || value === null || seen.has(value) || ArrayBuffer.isView(value)) return undefined;
  seen.add(value);
  if (value instanceof Map) {
    let i = 0;
    for (const [key, item] of value) {
      const found =
        unsendable(key, `${path} (key ${i} of the Map)`, seen) ?? unsendable(item, `${path}.get(${label(key)})`, seen);
      if (found) return found;
      i++;
    }
    return undefined;
  }
  if (value instanceof Set) {
    let i = 0;
    for (const item of value) {
      const found = unsendable(item, `${path} (item ${i++} of the Set)`, seen);
      if (found) return found;
    }
    return undefined;
  }
  for (const [key, item] of Object.entries(value)) {
    const step = Array.isArray(value) ? `[${key}]` : /^[A-Za-z_$][\w$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
    const found = unsendable(item, `${path}${step}`, seen);
    if (found) return found;
  }
  return undefined;
}

function label(key: unknown): string {
  return typeof key === 'string' ? JSON.stringify(key) : typeof key === 'object' && key !== null ? '<object>' : String(key);
}
