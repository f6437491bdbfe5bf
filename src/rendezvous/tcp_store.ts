/**
 * TCP key/value store: rank 0 hosts a TcpStoreServer, every rank (rank 0 included) talks to it
 * through a TcpStoreClient.
 *
 * How it works: see store_protocol.ts for the frames. The server keeps values in a map and,
 * per key, the gets waiting for it; a set answers those waiters at once, so nobody polls. A
 * waiting get carries its timeout: the server answers kOpTimeout at the deadline and drops the
 * waiter, and the client keeps its own timer too so a hung server cannot stall it. Anything
 * malformed (bad header, unknown op, bad key, request before hello) gets one kOpError frame with
 * requestId 0 and the connection is closed; the server itself never throws on input. Every
 * connection is authenticated both ways with the job secret before its first request (see
 * store_protocol.ts and auth.ts).
 *
 * A store that goes away is named as such, not as a key that was never set: a closed connection
 * says which process hosts the store (`host`), and with `silenceMs` the client, while requests
 * are pending, pings the store (a get of a key nobody sets, with timeout 0, which a live server
 * answers at once) and fails every request once the store has said nothing for `silenceMs`: its
 * process is stopped or hung, or its host is down or cut off. A hello unanswered that long fails
 * the same way.
 */
import type net from 'node:net';
import { performance } from 'node:perf_hooks';
import { ProtocolError, RingReduceError, ShutdownError, TimeoutError } from '../core/errors.js';
import { JobKey, kMacBytes, kNonceBytes, newNonce } from './auth.js';
import { dial } from './dial.js';
import type { Store, StoreAddress } from './store.js';
import {
  decodeI64,
  decodeText,
  encodeFrame,
  encodeI64,
  encodeKeyed,
  kDefaultMaxStoreFrameBytes,
  kOpAdd,
  kOpAuth,
  kOpError,
  kOpGet,
  kOpHello,
  kOpHelloOk,
  kOpOk,
  kOpSet,
  kOpTimeout,
  kStoreClientLabel,
  kStoreServerLabel,
  type StoreFrame,
  StoreFrameReader,
} from './store_protocol.js';
import type { TlsLinks } from './tls_links.js';

export { TcpStoreServer, type TcpStoreServerOptions } from './tcp_store_server.js';

export interface TcpStoreClientOptions extends StoreAddress {
  /** How long to keep retrying the connection (the server may start later). */
  connectTimeoutMs: number;
  /** The job secret to prove (unset: the empty key, see auth.ts). */
  key?: JobKey;
  /** Aborting stops the connection retries. */
  signal?: AbortSignal;
  maxFrameBytes?: number;
  /** Speak TLS (tls_links.ts) to a store that does. */
  tls?: TlsLinks;
  /** Who hosts the store ("rank 0", "ringrun"), for the errors that say it is gone. */
  hostedBy?: string;
  /** Fail every pending request once the store has been silent this long (see above); unset: never. */
  silenceMs?: number;
}

/** The key of the pings: nobody sets it, so the server answers a get of it at once (kOpTimeout). */
const kPingKey = 'ringreduce/store-ping';

/** The server answers a get at its deadline; the client's own timer only guards against a hung server. */
const kClientGraceMs = 1000;

interface PendingRequest {
  key: string;
  timeoutMs: number;
  resolve: (body: Uint8Array) => void;
  reject: (error: Error) => void;
  timer: NodeJS.Timeout | null;
}

/** The client end of the TCP store; one connection, requests pipelined by id. */
export class TcpStoreClient implements Store {
  private readonly pending = new Map<number, PendingRequest>();
  private nextId = 1;
  private failure: Error | null = null;
  private readonly where: string;
  /** "the store at 10.0.0.1:29500 (rank 0 hosts it)", for errors that blame the store. */
  private readonly named: string;
  private readonly hostedBy: string | undefined;
  private readonly silenceMs: number | undefined;
  /** When the store last sent anything, or a request went out with none pending (performance.now()). */
  private heardAt = performance.now();
  private pingTimer: NodeJS.Timeout | null = null;
  /** Pings go out only once authenticated: the server closes a connection that asks before. */
  private ready = false;

  private constructor(
    private readonly socket: net.Socket,
    options: TcpStoreClientOptions,
  ) {
    this.where = `${options.host}:${options.port}`;
    this.hostedBy = options.hostedBy;
    this.silenceMs = options.silenceMs;
    this.named = `the store at ${this.where}${options.hostedBy === undefined ? '' : ` (${options.hostedBy} hosts it)`}`;
    const reader = new StoreFrameReader(options.maxFrameBytes ?? kDefaultMaxStoreFrameBytes);
    socket.on('data', (chunk: Buffer) => {
      try {
        reader.push(chunk, (frame) => this.onFrame(frame));
      } catch (error) {
        this.fail(new RingReduceError(`bad reply from the store at ${this.where}: ${(error as Error).message}`));
      }
    });
    socket.on('error', (error) =>
      this.fail(this.lost(`broke the connection (${(error as NodeJS.ErrnoException).code ?? error.message})`)),
    );
    socket.on('close', () => this.fail(this.lost('closed the connection')));
  }

  /**
   * Connects (retrying until the deadline) and authenticates both ways: the store proves it
   * knows the job secret, then we do. Rejects with ProtocolError when either proof fails.
   */
  static async connect(options: TcpStoreClientOptions): Promise<TcpStoreClient> {
    const deadline = performance.now() + options.connectTimeoutMs;
    const socket = await dial({
      host: options.host,
      port: options.port,
      deadline,
      what: 'the store',
      ...(options.signal && { signal: options.signal }),
      ...(options.tls && { tls: options.tls }),
    });
    const client = new TcpStoreClient(socket, options);
    const key = options.key ?? new JobKey(undefined);
    // A live store answers the hello at once: one silent for silenceMs is not coming back.
    const remaining = () => Math.max(1, Math.ceil(Math.min(deadline - performance.now(), options.silenceMs ?? Infinity)));
    try {
      const ours = newNonce();
      const reply = await client.request(kOpHello, 'hello', ours, remaining(), 0);
      if (reply.byteLength !== kNonceBytes + kMacBytes) {
        throw new ProtocolError(`the store at ${client.where} answered the hello with ${reply.byteLength} bytes`);
      }
      const theirs = reply.subarray(0, kNonceBytes);
      if (!key.verify(reply.subarray(kNonceBytes), kStoreServerLabel, ours, theirs)) {
        throw new ProtocolError(
          `the store at ${client.where} could not prove it knows the job secret: it belongs to another job, or RINGREDUCE_SECRET differs`,
        );
      }
      await client.request(kOpAuth, 'hello', key.mac(kStoreClientLabel, ours, theirs), remaining(), 0);
    } catch (error) {
      await client.close();
      throw error;
    }
    client.ready = true;
    return client;
  }

  /** The local IP this client reached the store from: a good address to advertise to peers. */
  get localAddress(): string | undefined {
    return this.socket.localAddress;
  }

  /** The local port of the connection (with localAddress, how the server names this client). */
  get localPort(): number | undefined {
    return this.socket.localPort;
  }

  /** The store's IP as this client reached it (a host name resolved). */
  get remoteAddress(): string | undefined {
    return this.socket.remoteAddress;
  }

  async set(key: string, value: Uint8Array): Promise<void> {
    await this.request(kOpSet, key, encodeKeyed(new Uint8Array(0), key, value), 0);
  }

  async get(key: string, timeoutMs: number): Promise<Uint8Array> {
    const prefix = Buffer.allocUnsafe(4);
    prefix.writeUInt32LE(Math.min(Math.max(0, Math.ceil(timeoutMs)), 0xffff_ffff), 0);
    return this.request(kOpGet, key, encodeKeyed(prefix, key), timeoutMs);
  }

  async add(key: string, delta: number): Promise<number> {
    const body = await this.request(kOpAdd, key, encodeKeyed(encodeI64(delta), key), 0);
    return decodeI64(body, `store counter "${key}"`);
  }

  async close(): Promise<void> {
    this.stopPings();
    this.fail(new ShutdownError(`store client for ${this.where} was closed`));
    if (this.socket.closed) return;
    await new Promise<void>((resolve) => {
      this.socket.once('close', () => resolve());
      this.socket.destroy();
    });
  }

  /**
   * Sends one request. Gets and the hello arm a client-side deadline; sets and adds are
   * answered at once by a live server and end with the connection otherwise.
   */
  private request(op: number, key: string, body: Uint8Array, timeoutMs: number, id = this.nextId++): Promise<Uint8Array> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      const entry: PendingRequest = { key, timeoutMs, resolve, reject, timer: null };
      const sentAt = performance.now();
      if (op === kOpGet || op === kOpHello || op === kOpAuth) {
        const waitMs = op === kOpGet ? timeoutMs + kClientGraceMs : timeoutMs;
        entry.timer = setTimeout(() => {
          this.pending.delete(id);
          // Nothing at all came back since the request left, for a wait as long as the silence
          // limit: the store is gone, not the key late. A shorter wait (a quick check's 1 s grace)
          // fails this request only: a busy store host can be that slow. (The wait's own length,
          // not the clock: a timer may fire a fraction of a millisecond early by performance.now().)
          const gone = this.silenceMs !== undefined && this.heardAt <= sentAt && waitMs >= this.silenceMs;
          const error = gone ? this.silent() : this.timeoutError(key, timeoutMs);
          reject(error);
          if (gone) this.fail(error);
        }, waitMs);
      }
      if (this.pending.size === 0) this.heardAt = sentAt;
      this.pending.set(id, entry);
      this.socket.write(encodeFrame(op, id, body));
      this.armPings();
    });
  }

  private timeoutError(key: string, timeoutMs: number): TimeoutError {
    if (key === 'hello') return new TimeoutError(`${this.named} did not answer the hello within ${timeoutMs} ms`);
    return new TimeoutError(`store key "${key}" was not set within ${timeoutMs} ms (store at ${this.where})`);
  }

  /** Pings while requests are pending (and silence is watched): one timer, armed only then. */
  private armPings(): void {
    const silenceMs = this.silenceMs;
    if (silenceMs === undefined || this.pingTimer !== null || this.failure) return;
    const period = Math.max(50, Math.floor(silenceMs / 4));
    this.pingTimer = setInterval(() => {
      if (this.pending.size === 0) {
        this.stopPings();
        return;
      }
      const quiet = performance.now() - this.heardAt;
      if (quiet >= silenceMs) {
        this.fail(this.silent());
        return;
      }
      if (this.ready && quiet >= period) {
        const prefix = Buffer.alloc(4); // timeout 0: answered at once
        this.socket.write(encodeFrame(kOpGet, this.nextId++, encodeKeyed(prefix, kPingKey)));
      }
    }, period);
    // The pending requests' own timers keep the process alive, not the pings.
    this.pingTimer.unref();
  }

  private stopPings(): void {
    if (this.pingTimer !== null) clearInterval(this.pingTimer);
    this.pingTimer = null;
  }

  /** The store went away: the error every pending and later request fails with. */
  private lost(how: string): RingReduceError {
    const gone = this.hostedBy === undefined ? '' : `: ${this.hostedBy} ended, or its host went down`;
    return new RingReduceError(`${this.named} ${how}${gone}`);
  }

  private silent(): RingReduceError {
    const quiet = Math.round(performance.now() - this.heardAt);
    return new RingReduceError(
      `${this.named} has not answered for ${quiet} ms: its process is stopped or hung, or its host is down or cut off`,
    );
  }

  private onFrame(frame: StoreFrame): void {
    this.heardAt = performance.now();
    if (frame.op === kOpError && frame.requestId === 0) {
      this.fail(new RingReduceError(`the store at ${this.where} closed the connection: ${decodeText(frame.body)}`));
      return;
    }
    const entry = this.pending.get(frame.requestId);
    if (!entry) return; // answer to a request we already timed out
    this.pending.delete(frame.requestId);
    if (entry.timer) clearTimeout(entry.timer);
    if (frame.op === kOpOk || frame.op === kOpHelloOk) entry.resolve(frame.body);
    else if (frame.op === kOpTimeout) entry.reject(this.timeoutError(entry.key, entry.timeoutMs));
    else if (frame.op === kOpError) entry.reject(new RingReduceError(`store at ${this.where}: ${decodeText(frame.body)}`));
    else this.fail(new RingReduceError(`the store at ${this.where} sent an unexpected op 0x${frame.op.toString(16)}`));
  }

  private fail(error: Error): void {
    if (this.failure) return;
    this.failure = error;
    this.stopPings();
    for (const entry of this.pending.values()) {
      if (entry.timer) clearTimeout(entry.timer);
      entry.reject(error);
    }
    this.pending.clear();
    this.socket.destroy();
  }
}
