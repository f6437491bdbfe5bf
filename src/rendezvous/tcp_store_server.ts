/**
 * The server half of the TCP store (see tcp_store.ts for the overview, store_protocol.ts for
 * the frames). Input is untrusted: every parse error is caught per connection, answered with
 * one kOpError frame and that connection alone is closed.
 */
import net from 'node:net';
import { InvalidArgumentError, ProtocolError } from '../api/errors.js';
import type { StoreAddress } from './store.js';
import {
  decodeI64,
  decodeKeyed,
  encodeFrame,
  encodeI64,
  kAuthNone,
  kDefaultMaxStoreFrameBytes,
  kOpAdd,
  kOpError,
  kOpGet,
  kOpHello,
  kOpHelloOk,
  kOpOk,
  kOpSet,
  kOpTimeout,
  type StoreFrame,
  StoreFrameReader,
} from './store_protocol.js';

export interface TcpStoreServerOptions extends StoreAddress {
  maxFrameBytes?: number;
  /** Told about every connection closed for a protocol violation (for logs and tests). */
  onProtocolError?: (error: ProtocolError, remote: string) => void;
}

interface Connection {
  socket: net.Socket;
  remote: string;
  greeted: boolean;
  closing: boolean;
  waiters: Set<Waiter>;
}

interface Waiter {
  conn: Connection;
  key: string;
  requestId: number;
  timer: NodeJS.Timeout;
}

const kEmpty = new Uint8Array(0);
/** After the error frame, how long a misbehaving client gets to read it before we cut it off. */
const kLingerMs = 1000;

export class TcpStoreServer {
  private readonly server = net.createServer((socket) => this.accept(socket));
  private readonly values = new Map<string, Uint8Array>();
  private readonly waiting = new Map<string, Set<Waiter>>();
  private readonly connections = new Set<Connection>();
  private readonly maxFrameBytes: number;
  private bound: StoreAddress | null = null;
  private closed = false;

  constructor(private readonly options: TcpStoreServerOptions) {
    this.maxFrameBytes = options.maxFrameBytes ?? kDefaultMaxStoreFrameBytes;
  }

  /** Starts listening; resolves with the bound address (useful with port 0). */
  listen(): Promise<StoreAddress> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen({ host: this.options.host, port: this.options.port }, () => {
        this.server.off('error', reject);
        const address = this.server.address() as net.AddressInfo;
        this.bound = { host: address.address, port: address.port };
        resolve(this.bound);
      });
    });
  }

  get address(): StoreAddress | null {
    return this.bound;
  }

  /** Stops listening and drops every connection and waiter. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // The callback runs once every connection is gone (or at once, with an error we ignore, if never listening).
    const done = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const conn of this.connections) this.drop(conn);
    await done;
  }

  private accept(socket: net.Socket): void {
    const remote = `${socket.remoteAddress}:${socket.remotePort}`;
    const conn: Connection = { socket, remote, greeted: false, closing: false, waiters: new Set() };
    if (this.closed) {
      socket.destroy();
      return;
    }
    this.connections.add(conn);
    socket.setNoDelay(true);
    const reader = new StoreFrameReader(this.maxFrameBytes);
    socket.on('data', (chunk: Buffer) => {
      if (conn.closing) return;
      try {
        reader.push(chunk, (frame) => this.handle(conn, frame));
      } catch (error) {
        this.refuse(conn, error);
      }
    });
    socket.on('error', () => {}); // a reset client is just gone; 'close' cleans up
    socket.on('close', () => this.drop(conn));
  }

  private handle(conn: Connection, frame: StoreFrame): void {
    if (conn.closing) return;
    if (!conn.greeted) {
      if (frame.op !== kOpHello) throw new ProtocolError(`expected a hello first, got op 0x${frame.op.toString(16)}`);
      if (frame.body.byteLength !== 1 || ((frame.body[0] as number) & kAuthNone) === 0) {
        throw new ProtocolError('the hello offers no auth method this server supports');
      }
      conn.greeted = true;
      this.reply(conn, kOpHelloOk, frame.requestId, Uint8Array.of(kAuthNone, 0));
      return;
    }
    switch (frame.op) {
      case kOpSet: {
        const { key, rest } = decodeKeyed(frame.body, 0);
        this.store(key, rest);
        this.reply(conn, kOpOk, frame.requestId, kEmpty);
        return;
      }
      case kOpGet: {
        if (frame.body.byteLength < 4) throw new ProtocolError('get request without a timeout');
        const timeoutMs = Buffer.from(frame.body.buffer, frame.body.byteOffset, 4).readUInt32LE(0);
        this.get(conn, frame.requestId, decodeKeyed(frame.body, 4).key, timeoutMs);
        return;
      }
      case kOpAdd: {
        if (frame.body.byteLength < 8) throw new ProtocolError('add request without a delta');
        const delta = decodeI64(frame.body.subarray(0, 8), 'add delta');
        const { key, rest } = decodeKeyed(frame.body, 8);
        if (rest.byteLength !== 0) throw new ProtocolError(`add request for "${key}" has ${rest.byteLength} trailing bytes`);
        this.add(conn, frame.requestId, key, delta);
        return;
      }
      default:
        throw new ProtocolError(`op 0x${frame.op.toString(16)} is not a request`);
    }
  }

  private get(conn: Connection, requestId: number, key: string, timeoutMs: number): void {
    const value = this.values.get(key);
    if (value !== undefined || timeoutMs === 0) {
      this.reply(conn, value === undefined ? kOpTimeout : kOpOk, requestId, value ?? kEmpty);
      return;
    }
    const waiter: Waiter = {
      conn,
      key,
      requestId,
      timer: setTimeout(() => {
        this.forget(waiter);
        this.reply(conn, kOpTimeout, requestId, kEmpty);
      }, timeoutMs),
    };
    conn.waiters.add(waiter);
    const set = this.waiting.get(key) ?? new Set();
    this.waiting.set(key, set);
    set.add(waiter);
  }

  private add(conn: Connection, requestId: number, key: string, delta: number): void {
    const current = this.values.get(key);
    let value: number;
    try {
      value = (current === undefined ? 0 : decodeI64(current, `counter "${key}"`)) + delta;
      if (!Number.isSafeInteger(value)) throw new InvalidArgumentError(`counter "${key}" would leave the safe integer range`);
    } catch (error) {
      // A semantic error (the key holds a non-counter value): that request fails, the link stays.
      this.reply(conn, kOpError, requestId, Buffer.from((error as Error).message));
      return;
    }
    const bytes = encodeI64(value);
    this.store(key, bytes);
    this.reply(conn, kOpOk, requestId, bytes);
  }

  private store(key: string, value: Uint8Array): void {
    this.values.set(key, value);
    const waiters = this.waiting.get(key);
    if (!waiters) return;
    this.waiting.delete(key);
    for (const waiter of waiters) {
      clearTimeout(waiter.timer);
      waiter.conn.waiters.delete(waiter);
      this.reply(waiter.conn, kOpOk, waiter.requestId, value);
    }
  }

  private forget(waiter: Waiter): void {
    clearTimeout(waiter.timer);
    waiter.conn.waiters.delete(waiter);
    const set = this.waiting.get(waiter.key);
    set?.delete(waiter);
    if (set?.size === 0) this.waiting.delete(waiter.key);
  }

  private reply(conn: Connection, op: number, requestId: number, body: Uint8Array): void {
    if (!conn.closing && !conn.socket.destroyed) conn.socket.write(encodeFrame(op, requestId, body));
  }

  /** Answers a protocol violation with one error frame, then closes that connection only. */
  private refuse(conn: Connection, error: unknown): void {
    const protocolError =
      error instanceof ProtocolError ? error : new ProtocolError(`internal error: ${(error as Error)?.message ?? error}`);
    this.options.onProtocolError?.(protocolError, conn.remote);
    const message = `protocol error from ${conn.remote}: ${protocolError.message}`;
    for (const waiter of [...conn.waiters]) this.forget(waiter);
    conn.closing = true;
    const linger = setTimeout(() => conn.socket.destroy(), kLingerMs);
    linger.unref();
    conn.socket.once('close', () => clearTimeout(linger));
    conn.socket.end(encodeFrame(kOpError, 0, Buffer.from(message)));
  }

  private drop(conn: Connection): void {
    for (const waiter of [...conn.waiters]) this.forget(waiter);
    this.connections.delete(conn);
    conn.closing = true;
    conn.socket.destroy();
  }
}
