/**
 * The accepting half of the mesh: listens on an ephemeral port (and, for ranks on the same
 * host, on a Unix socket: local_socket.ts), runs the acceptor's side of the handshake
 * (handshake.ts) on every incoming connection, whichever listener it came through, and keeps
 * one accepted socket per peer rank. A rank's slot is taken only once its dialer has proven
 * it knows the job secret. A connection that is not ours, claims the wrong job, size or rank,
 * or fails the proof, is refused, reported through `onRefused` (the engine logs it) and
 * recorded so a timeout message can say who knocked; the mesh goes on waiting for the real
 * peer. The reports are rate-limited: a flood makes a few and a summary (report_limiter.ts).
 */
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { TimeoutError } from '../core/errors.js';
import { type JobKey, newNonce } from './auth.js';
import {
  acceptorProof,
  decodeHello,
  decodeResponse,
  encodeAck,
  encodeChallenge,
  type Hello,
  helloLength,
  kAckBadAuth,
  kAckBadRank,
  kAckBadVersion,
  kAckDuplicateRank,
  kAckOk,
  kAckWrongJob,
  kAckWrongSize,
  kFixedBytes,
  kMeshVersion,
  kResponseBytes,
  type Transcript,
  verifyDialer,
} from './handshake.js';
import { removeSocketFile } from './local_socket.js';
import { type ReportLimit, ReportLimiter } from './report_limiter.js';
import { kTlsHint, type TlsLinks } from './tls_links.js';

export interface MeshAcceptorOptions {
  rank: number;
  size: number;
  jobId: string;
  key: JobKey;
  /** Told about refused connections: "address", "reason" (rate-limited: see reportLimit). */
  onRefused?: (remote: string, reason: string) => void;
  /** How the reports are rate-limited (false: every one); default kDefaultReportLimit. */
  reportLimit?: ReportLimit | false;
  /** Run TLS on connections accepted over TCP (Unix socket ones stay plain): tls_links.ts. */
  tls?: TlsLinks;
}

/** What an incoming connection has sent so far, and where its handshake stands. */
interface Incoming {
  socket: net.Socket;
  remote: string;
  received: Buffer;
  /** Set once the hello passed its checks and the challenge went out. */
  transcript: Transcript | null;
  rank: number;
  refused: boolean;
}

export class MeshAcceptor {
  private readonly server = net.createServer((socket) => this.onConnection(socket, null));
  /** The Unix socket listener and its path, while it listens. */
  private local: { server: net.Server; path: string } | null = null;
  readonly accepted = new Map<number, net.Socket>();
  /** "address: reason" of every refused connection, newest last (bounded). */
  readonly refused: string[] = [];
  private readonly handshaking = new Set<net.Socket>();
  private notify: (() => void) | null = null;
  private listening = true;
  private readonly rank: number;
  private readonly size: number;
  private readonly reports: ReportLimiter;

  constructor(private readonly options: MeshAcceptorOptions) {
    this.rank = options.rank;
    this.size = options.size;
    this.reports = new ReportLimiter(options.reportLimit);
  }

  /** Listens on `host` with an ephemeral port; resolves with the port. */
  async listen(host: string): Promise<number> {
    await listenOn(this.server, { host, port: 0 });
    return (this.server.address() as net.AddressInfo).port;
  }

  /**
   * Also listens on the Unix socket `path` (a stale file there is removed first); resolves
   * false when it cannot (the peers then dial TCP). stopListening() removes the file.
   */
  async listenLocal(path: string): Promise<boolean> {
    if (!this.listening || this.local) return false;
    removeSocketFile(path);
    const server = net.createServer((socket) => this.onConnection(socket, path));
    try {
      await listenOn(server, { path });
    } catch {
      removeSocketFile(path);
      return false;
    }
    if (!this.listening) {
      // Stopped while we were binding.
      server.close();
      removeSocketFile(path);
      return false;
    }
    this.local = { server, path };
    return true;
  }

  /** Ranks that have not connected to us yet. */
  missing(): number[] {
    const out: number[] = [];
    for (let r = 0; r < this.size; r++) if (r !== this.rank && !this.accepted.has(r)) out.push(r);
    return out;
  }

  /** Resolves once every peer has connected; rejects with TimeoutError at the deadline or on abort. */
  whenComplete(deadline: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      const finish = (error?: unknown) => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        this.notify = null;
        if (error === undefined) resolve();
        else reject(error);
      };
      const onAbort = () => finish(signal.reason);
      const timer = setTimeout(
        () => finish(new TimeoutError(`ranks [${this.missing().join(', ')}] did not connect`)),
        Math.max(0, deadline - performance.now()),
      );
      signal.addEventListener('abort', onAbort, { once: true });
      this.notify = () => {
        if (this.accepted.size === this.size - 1) finish();
      };
      this.notify();
    });
  }

  stopListening(): void {
    this.listening = false;
    this.reports.close();
    if (this.server.listening) this.server.close();
    if (this.local) {
      this.local.server.close();
      removeSocketFile(this.local.path);
      this.local = null;
    }
    for (const socket of this.handshaking) socket.destroy();
    this.handshaking.clear();
  }

  destroyAll(): void {
    this.stopListening();
    for (const socket of this.accepted.values()) socket.destroy();
  }

  /** `localPath`: the Unix socket it came through, else null (TCP). */
  private onConnection(raw: net.Socket, localPath: string | null): void {
    if (localPath === null) raw.setNoDelay(true); // Unix sockets have no Nagle
    const secure = localPath === null ? this.options.tls : undefined;
    // Under TLS the handshake below reads and writes the plaintext; the raw socket carries records.
    const socket = secure ? secure.accept(raw) : raw;
    this.handshaking.add(socket);
    const conn: Incoming = {
      socket,
      // A Unix socket's peer has no address: name the socket it came through.
      remote: localPath === null ? `${raw.remoteAddress}:${raw.remotePort}` : `unix:${localPath}`,
      received: Buffer.alloc(0),
      transcript: null,
      rank: -1,
      refused: false,
    };
    const onData = (chunk: Buffer) => {
      conn.received = conn.received.byteLength === 0 ? chunk : Buffer.concat([conn.received, chunk]);
      try {
        if (!this.step(conn)) return;
      } catch (error) {
        this.refuse(conn, (error as Error).message, null);
      }
      socket.off('data', onData);
    };
    socket.on('data', onData);
    // Errors end in 'close'; the transport installs its own handlers on accepted sockets.
    socket.on('error', (error: NodeJS.ErrnoException) => {
      // A client without TLS, or keyed from another secret, fails here, before any hello.
      if (secure && this.handshaking.has(socket) && !conn.refused && conn.transcript === null) {
        conn.refused = true;
        this.report(conn, `TLS handshake failed: ${error.code ?? error.message} (${kTlsHint})`);
      }
    });
    socket.once('close', () => {
      // A dialer without the secret finds out from our proof and hangs up; say so.
      if (this.handshaking.delete(socket) && this.listening && !conn.refused) {
        this.report(conn, 'closed the connection during the handshake (no or a wrong job secret?)');
      }
    });
  }

  /** Advances the handshake with what arrived; true once it is over (accepted or refused). */
  private step(conn: Incoming): boolean {
    if (conn.transcript === null) {
      if (conn.received.byteLength < kFixedBytes) return false;
      const length = helloLength(conn.received);
      if (conn.received.byteLength < length) return false;
      if (conn.received.byteLength > length) {
        this.refuse(conn, 'sent bytes after its hello before our challenge', null);
        return true;
      }
      const hello = decodeHello(conn.received);
      conn.received = Buffer.alloc(0);
      return this.challenge(conn, hello);
    }
    if (conn.received.byteLength < kResponseBytes) return false;
    if (conn.received.byteLength > kResponseBytes) {
      this.refuse(conn, 'sent bytes after its response before our ack', null);
      return true;
    }
    const proof = decodeResponse(conn.received, conn.rank, this.size);
    if (!verifyDialer(this.options.key, conn.transcript, proof)) {
      this.refuse(
        conn,
        `rank ${conn.rank}: authentication failed (wrong or missing job secret)`,
        encodeAck(kAckBadAuth, this.rank, this.size),
      );
      return true;
    }
    if (this.accepted.has(conn.rank)) {
      this.refuse(conn, `duplicate rank ${conn.rank}`, encodeAck(kAckDuplicateRank, this.rank, this.size));
      return true;
    }
    this.handshaking.delete(conn.socket);
    this.accepted.set(conn.rank, conn.socket);
    conn.socket.write(encodeAck(kAckOk, this.rank, this.size));
    this.notify?.();
    return true;
  }

  /** Checks the hello; sends our challenge (true: wait for the response) or a refusal. */
  private challenge(conn: Incoming, hello: Hello): boolean {
    let status = kAckOk;
    let reason = '';
    if (hello.version !== kMeshVersion) [status, reason] = [kAckBadVersion, `handshake version ${hello.version}`];
    else if (hello.jobId !== this.options.jobId) [status, reason] = [kAckWrongJob, `job id "${hello.jobId}"`];
    else if (hello.size !== this.size) [status, reason] = [kAckWrongSize, `world size ${hello.size}`];
    else if (hello.rank >= this.size || hello.rank === this.rank) [status, reason] = [kAckBadRank, `rank ${hello.rank}`];
    else if (this.accepted.has(hello.rank)) [status, reason] = [kAckDuplicateRank, `duplicate rank ${hello.rank}`];
    if (status !== kAckOk) {
      this.refuse(conn, reason, encodeChallenge(status, this.rank, this.size));
      return true;
    }
    const transcript: Transcript = {
      jobId: this.options.jobId,
      size: this.size,
      dialer: hello.rank,
      acceptor: this.rank,
      dialerNonce: hello.nonce,
      acceptorNonce: newNonce(),
    };
    conn.transcript = transcript;
    conn.rank = hello.rank;
    const proof = acceptorProof(this.options.key, transcript);
    conn.socket.write(encodeChallenge(kAckOk, this.rank, this.size, transcript.acceptorNonce, proof));
    return false;
  }

  private refuse(conn: Incoming, reason: string, answer: Buffer | null): void {
    conn.refused = true;
    this.report(conn, reason);
    if (answer) conn.socket.end(answer);
    else conn.socket.destroy();
  }

  private report(conn: Incoming, reason: string): void {
    if (this.refused.length < 16) this.refused.push(`${conn.remote}: ${reason}`);
    const remote = conn.remote;
    this.reports.offer(remote, (note) => this.options.onRefused?.(remote, `${reason}${note}`));
  }
}

function listenOn(server: net.Server, options: net.ListenOptions): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options, () => {
      server.off('error', reject);
      resolve();
    });
  });
}
