/**
 * The shared-memory lane: how large data messages between two ranks of one host skip the
 * socket. Node cannot map memory shared between processes, but it can read and write a file
 * in tmpfs (/dev/shm), whose pages are memory: a `pwrite` there is a copy into those pages and
 * a `pread` a copy out, at memory speed (15 GB/s here against 2.9 GB/s for a loopback stream),
 * with no socket buffer in between to fill, drain and wake the peer for every few hundred KiB.
 *
 * How it works, per direction (sender S to receiver R):
 * - S creates a file of `slots` slots of `slotBytes` each (sparse: pages exist once written),
 *   writes a random token at its start, and offers it to R on the socket (a link frame with
 *   the path, the geometry and the token).
 * - R opens the path and checks the token, which proves that it reads the very file S wrote
 *   (a peer on another host, or in another mount namespace, cannot), unlinks it (from now on
 *   only the two open descriptors keep it, so no crash leaves it behind), and accepts; on any
 *   failure it declines, and S keeps using the socket.
 * - Once accepted, a data message of at least `minBytes` and at most `slotBytes` is written into
 *   a free slot and announced by a small descriptor frame on the socket (framing.ts), in the
 *   socket's order. R copies it out (into the posted recv's buffer, or into a staging buffer like
 *   any unmatched message) and hands the slot back with a credit frame. A send that finds no
 *   free slot waits, and so does every later send to that peer (order per peer is the
 *   transport's contract); credits are link frames, which never wait, so no cycle of waits forms.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, openSync, readSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { ProtocolError } from '../../core/errors.js';
import { kSharedDescriptorBytes, readU32, writeU32 } from './framing.js';

export interface ShmLaneOptions {
  /** A tmpfs directory both ranks see (default /dev/shm). */
  dir: string;
  slots: number;
  slotBytes: number;
  /** Smaller messages stay on the socket: one small write is cheaper than a copy in and out. */
  minBytes: number;
}

const kTokenBytes = 16;
const kUtf8 = new TextDecoder();

export interface ShmOffer {
  path: string;
  slots: number;
  slotBytes: number;
  token: Uint8Array;
}

/** Link frame payload of an offer: token, u32 slots, u32 slotBytes, then the UTF-8 path. */
export function encodeOffer(offer: ShmOffer): Uint8Array {
  const path = Buffer.from(offer.path, 'utf8');
  const out = new Uint8Array(kTokenBytes + 8 + path.byteLength);
  out.set(offer.token, 0);
  writeU32(out, kTokenBytes, offer.slots);
  writeU32(out, kTokenBytes + 4, offer.slotBytes);
  out.set(path, kTokenBytes + 8);
  return out;
}

export function decodeOffer(payload: Uint8Array): ShmOffer {
  if (payload.byteLength <= kTokenBytes + 8)
    throw new ProtocolError(`shared-memory offer of ${payload.byteLength} bytes is too short`);
  return {
    token: payload.slice(0, kTokenBytes),
    slots: readU32(payload, kTokenBytes),
    slotBytes: readU32(payload, kTokenBytes + 4),
    path: kUtf8.decode(payload.subarray(kTokenBytes + 8)),
  };
}

/** Descriptor frame payload (framing.ts): u32 slot, u32 message length. */
export function encodeDescriptor(slot: number, length: number): Uint8Array {
  const out = new Uint8Array(kSharedDescriptorBytes);
  writeU32(out, 0, slot);
  writeU32(out, 4, length);
  return out;
}

export function decodeDescriptor(payload: Uint8Array): { slot: number; length: number } {
  return { slot: readU32(payload, 0), length: readU32(payload, 4) };
}

/** The sending half: the file, and which of its slots the receiver has handed back. */
export class ShmOutbox {
  readonly offer: ShmOffer;
  private readonly fd: number;
  private readonly free: number[] = [];
  private closed = false;
  private unlinked = false;

  /** Creates the file; throws (an fs error) when the directory is missing or not writable. */
  constructor(
    readonly options: ShmLaneOptions,
    name: string,
  ) {
    const token = randomBytes(kTokenBytes);
    const path = join(options.dir, `ringreduce-${name}-${process.pid}-${token.toString('hex', 0, 6)}`);
    this.fd = openSync(path, 'wx+', 0o600);
    this.offer = { path, slots: options.slots, slotBytes: options.slotBytes, token };
    try {
      writeSync(this.fd, token, 0, kTokenBytes, 0);
    } catch (error) {
      this.close();
      throw error;
    }
    for (let slot = options.slots - 1; slot >= 0; slot--) this.free.push(slot);
  }

  /** Whether a message of this many bytes goes through the lane. */
  fits(length: number): boolean {
    return length >= this.options.minBytes && length <= this.options.slotBytes;
  }

  /** A free slot, or undefined when every slot waits for the receiver's credit. */
  acquire(): number | undefined {
    return this.free.pop();
  }

  /** Copies `data` into `slot` (synchronously: when this returns, `data` may be reused). */
  write(slot: number, data: Uint8Array): void {
    const base = slot * this.options.slotBytes;
    for (let done = 0; done < data.byteLength; ) {
      done += writeSync(this.fd, data, done, data.byteLength - done, base + done);
    }
  }

  /** The receiver's credit for `slot`; throws ProtocolError for a slot that is not out. */
  release(slot: number): void {
    if (!Number.isInteger(slot) || slot < 0 || slot >= this.options.slots || this.free.includes(slot)) {
      throw new ProtocolError(`credit for shared-memory slot ${slot}, which is not in use`);
    }
    this.free.push(slot);
  }

  /** The receiver has its own descriptor (or declined): the name can go. */
  unlink(): void {
    if (this.unlinked) return;
    this.unlinked = true;
    try {
      unlinkSync(this.offer.path);
    } catch {
      // The receiver unlinked it first, as it should.
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.unlink();
    closeSync(this.fd);
  }
}

/** The receiving half: the sender's file, opened and checked. */
export class ShmInbox {
  private closed = false;

  private constructor(
    private readonly fd: number,
    readonly slots: number,
    readonly slotBytes: number,
  ) {}

  /**
   * Opens the offered file, checks its token and unlinks it; returns undefined when the file
   * cannot be opened or is not the one offered (the peer is on another host).
   */
  static accept(offer: ShmOffer): ShmInbox | undefined {
    if (offer.slots < 1 || offer.slotBytes < 1) return undefined;
    let fd: number;
    try {
      fd = openSync(offer.path, 'r');
    } catch {
      return undefined;
    }
    const seen = new Uint8Array(kTokenBytes);
    let same = false;
    try {
      same = readSync(fd, seen, 0, kTokenBytes, 0) === kTokenBytes && Buffer.compare(seen, offer.token) === 0;
      if (same) unlinkSync(offer.path);
    } catch {
      same = false;
    }
    if (!same) {
      closeSync(fd);
      return undefined;
    }
    return new ShmInbox(fd, offer.slots, offer.slotBytes);
  }

  /** Copies the message in `slot` into `into` (its exact length). Throws ProtocolError for a bad descriptor. */
  read(slot: number, into: Uint8Array): void {
    if (slot >= this.slots || into.byteLength > this.slotBytes) {
      throw new ProtocolError(
        `shared-memory descriptor for slot ${slot} with ${into.byteLength} bytes, outside ${this.slots} slots of ${this.slotBytes}`,
      );
    }
    const base = slot * this.slotBytes;
    for (let done = 0; done < into.byteLength; ) {
      const n = readSync(this.fd, into, done, into.byteLength - done, base + done);
      if (n === 0) throw new ProtocolError(`shared-memory slot ${slot} ended after ${done} of ${into.byteLength} bytes`);
      done += n;
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    closeSync(this.fd);
  }
}
