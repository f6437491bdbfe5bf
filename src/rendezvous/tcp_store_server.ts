/**
 * The server half of the TCP store (see tcp_store.ts for the overview, store_protocol.ts for
 * the frames). Input is untrusted: every parse error is caught per connection, answered with
 * one kOpError frame and that connection alone is closed. A connection must authenticate
 * (hello, then auth) within kAuthTimeoutMs, with small frames only, before any request; at
 * most kMaxUnauthenticated connections may be at that stage at once. Refusals and protocol
 * errors are reported through one ReportLimiter: a flood of strangers makes a few reports and
 * a summary per window, not one line each (report_limiter.ts).
 */
import net from 'node:net';
import { InvalidArgumentError, ProtocolError } from '../core/errors.js';
import { JobKey, kMacBytes, kNonceBytes, newNonce } from './auth.js';
import { type ReportLimit, ReportLimiter } from './report_limiter.js';
import type { StoreAddress } from './store.js';
import {
  decodeI64,
  decodeKeyed,
  encodeFrame,
  encodeI64,
  kDefaultMaxStoreFrameBytes,
  kMaxPreAuthBytes,
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
import { kTlsHint, type TlsLinks } from './tls_links.js';

export interface TcpStoreServerOptions extends StoreAddress {
  /** The job secret every client must prove it knows (unset: the empty key, see auth.ts). */
  key?: JobKey;
  maxFrameBytes?: number;
  /** Told about every connection closed for a protocol violation (for logs and tests). */
  onProtocolError?: (error: ProtocolError, remote: string) => void;
  /** Told about every client refused for failing (or never finishing) authentication. */
  onRefused?: (remote: string, reason: string) => void;
  /** How long a client has to authenticate; default kAuthTimeoutMs. */
  authTimeoutMs?: number;
  /** Told when an authenticated client's connection closes (it left, or its process or host died). */
  onDisconnect?: (remote: string) => void;
  /** How refusals and protocol errors are rate-limited (false: every one is reported); default kDefaultReportLimit. */
  reportLimit?: ReportLimit | false;
  /** Every client speaks TLS (tls_links.ts) under the store protocol. */
  tls?: TlsLinks;
}

interface Connection {
  socket: net.Socket;
  remote: string;
  stage: 'hello' | 'auth' | 'ready';
  /** The client's and our nonce, once the hello is answered. */
  nonces: [Buffer, Buffer] | null;
  authTimer: NodeJS.Timeout | null;
  closing: boolean;
  waiters: Set<Waiter>;
}

const kAuthTimeoutMs = 10_000;
const kMaxUnauthenticated = 64;

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
  private readonly key: JobKey;
  private unauthenticated = 0;
  private bound: StoreAddress | null = null;
  private closed = false;
  /** Whether the server and its connections keep the process alive (hold). */
  private holding = true;
  private readonly reports: ReportLimiter;

  constructor(private readonly options: TcpStoreServerOptions) {
    this.maxFrameBytes = options.maxFrameBytes ?? kDefaultMaxStoreFrameBytes;
    this.key = options.key ?? new JobKey(undefined);
    this.reports = new ReportLimiter(options.reportLimit);
  }

  /**
   * Starts listening; resolves with the bound address (useful with port 0). A port already in
   * use rejects with an InvalidArgumentError that says so and what commonly holds it.
   */
  listen(): Promise<StoreAddress> {
    return new Promise((resolve, reject) => {
      const failed = (error: NodeJS.ErrnoException) => {
        if (error.code !== 'EADDRINUSE') {
          reject(error);
          return;
        }
        const where = `${this.options.host}:${this.options.port}`;
        reject(
          new InvalidArgumentError(
            `cannot host the rendezvous store on ${where}: the port is in use. Another job or program holds it (a launcher's own store, such as torchrun's agent on MASTER_PORT, or a job still running); give the job another port (RINGREDUCE_STORE_ADDR, or ringrun --store-port)`,
          ),
        );
      };
      this.server.once('error', failed);
      this.server.listen({ host: this.options.host, port: this.options.port }, () => {
        this.server.off('error', failed);
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
    this.reports.close();
    // The callback runs once every connection is gone (or at once, with an error we ignore, if never listening).
    const done = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const conn of this.connections) this.drop(conn);
    await done;
  }

  /** Whether the server and its connections keep the process alive (a rank's engine on its caller's thread: while calls are pending). */
  hold(hold: boolean): void {
    this.holding = hold;
    if (hold) this.server.ref();
    else this.server.unref();
    for (const conn of this.connections) holdSocket(conn.socket, hold);
  }

  private accept(raw: net.Socket): void {
    const remote = `${raw.remoteAddress}:${raw.remotePort}`;
    if (this.closed || this.unauthenticated >= kMaxUnauthenticated) {
      if (!this.closed) this.refused(remote, `more than ${kMaxUnauthenticated} connections are authenticating`);
      raw.destroy();
      return;
    }
    raw.setNoDelay(true);
    if (!this.holding) raw.unref();
    // Under TLS the protocol below reads and writes the plaintext.
    const socket = this.options.tls ? this.options.tls.accept(raw) : raw;
    const conn: Connection = {
      socket,
      remote,
      stage: 'hello',
      nonces: null,
      authTimer: null,
      closing: false,
      waiters: new Set(),
    };
    this.connections.add(conn);
    this.unauthenticated++;
    const authTimeoutMs = this.options.authTimeoutMs ?? kAuthTimeoutMs;
    conn.authTimer = setTimeout(() => {
      this.refused(remote, `did not authenticate within ${authTimeoutMs} ms`);
      this.drop(conn);
    }, authTimeoutMs);
    conn.authTimer.unref();
    const reader = new StoreFrameReader(kMaxPreAuthBytes);
    socket.on('data', (chunk: Buffer) => {
      if (conn.closing) return;
      try {
        reader.push(chunk, (frame) => {
          this.handle(conn, frame);
          if (conn.stage === 'ready') reader.maxFrameBytes = this.maxFrameBytes;
        });
      } catch (error) {
        this.refuse(conn, error);
      }
    });
    socket.on('error', (error: NodeJS.ErrnoException) => {
      // A reset client is just gone ('close' cleans up); one that fails TLS is refused by name.
      if (this.options.tls && conn.stage === 'hello' && !conn.closing && !this.closed && error.code?.startsWith('ERR_SSL')) {
        conn.closing = true;
        this.refused(remote, `TLS handshake failed: ${error.code} (${kTlsHint})`);
      }
    });
    socket.on('close', () => {
      // A client without the secret (or of another job) finds out from our proof and hangs up.
      if (!conn.closing && conn.stage !== 'ready' && !this.closed) {
        this.refused(remote, 'closed the connection before authenticating (no or a wrong job secret?)');
      }
      if (conn.stage === 'ready' && !this.closed) this.options.onDisconnect?.(remote);
      this.drop(conn);
    });
  }

  private handle(conn: Connection, frame: StoreFrame): void {
    if (conn.closing) return;
    if (conn.stage !== 'ready') {
      this.authenticate(conn, frame);
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

  /** The hello (answered with our nonce and proof), then the client's proof. */
  private authenticate(conn: Connection, frame: StoreFrame): void {
    if (conn.stage === 'hello') {
      if (frame.op !== kOpHello) throw new ProtocolError(`expected a hello first, got op 0x${frame.op.toString(16)}`);
      if (frame.body.byteLength !== kNonceBytes) throw new ProtocolError(`hello of ${frame.body.byteLength} bytes`);
      const nonces: [Buffer, Buffer] = [Buffer.from(frame.body), newNonce()];
      conn.nonces = nonces;
      conn.stage = 'auth';
      const proof = this.key.mac(kStoreServerLabel, ...nonces);
      this.reply(conn, kOpHelloOk, 0, Buffer.concat([nonces[1], proof]));
      return;
    }
    if (frame.op !== kOpAuth) throw new ProtocolError(`expected the auth after the hello, got op 0x${frame.op.toString(16)}`);
    const nonces = conn.nonces as [Buffer, Buffer];
    if (frame.body.byteLength !== kMacBytes || !this.key.verify(frame.body, kStoreClientLabel, ...nonces)) {
      const reason = 'authentication failed: wrong or missing job secret (RINGREDUCE_SECRET)';
      this.refused(conn.remote, reason);
      this.refuse(conn, new ProtocolError(reason), false);
      return;
    }
    conn.stage = 'ready';
    this.endAuthStage(conn);
    this.reply(conn, kOpOk, 0, kEmpty);
  }

  private endAuthStage(conn: Connection): void {
    if (conn.authTimer === null) return;
    clearTimeout(conn.authTimer);
    conn.authTimer = null;
    this.unauthenticated--;
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
  private refuse(conn: Connection, error: unknown, report = true): void {
    if (conn.closing) return;
    const protocolError =
      error instanceof ProtocolError ? error : new ProtocolError(`internal error: ${(error as Error)?.message ?? error}`);
    if (report) {
      const remote = conn.remote;
      this.reports.offer(remote, (note) =>
        this.options.onProtocolError?.(
          note === '' ? protocolError : new ProtocolError(`${protocolError.message}${note}`),
          remote,
        ),
      );
    }
    this.endAuthStage(conn);
    const message = `protocol error from ${conn.remote}: ${protocolError.message}`;
    for (const waiter of [...conn.waiters]) this.forget(waiter);
    conn.closing = true;
    const linger = setTimeout(() => conn.socket.destroy(), kLingerMs);
    linger.unref();
    conn.socket.once('close', () => clearTimeout(linger));
    conn.socket.end(encodeFrame(kOpError, 0, Buffer.from(message)));
  }

  /** Reports a refused client, rate-limited. */
  private refused(remote: string, reason: string): void {
    this.reports.offer(remote, (note) => this.options.onRefused?.(remote, `${reason}${note}`));
  }

  private drop(conn: Connection): void {
    this.endAuthStage(conn);
    for (const waiter of [...conn.waiters]) this.forget(waiter);
    this.connections.delete(conn);
    conn.closing = true;
    conn.socket.destroy();
  }
}

function holdSocket(socket: net.Socket, hold: boolean): void {
  if (hold) socket.ref();
  else socket.unref();
}
