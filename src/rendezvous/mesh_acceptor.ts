/**
 * The accepting half of the mesh: listens on an ephemeral port, checks the hello of every
 * incoming connection (handshake.ts) and keeps one accepted socket per peer rank. A connection
 * that is not ours, or claims the wrong job, size or rank, is refused and recorded so a timeout
 * message can say who knocked.
 */
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { TimeoutError } from '../api/errors.js';
import {
  decodeHello,
  encodeAck,
  helloLength,
  kAckBadRank,
  kAckBadVersion,
  kAckDuplicateRank,
  kAckOk,
  kAckWrongJob,
  kAckWrongSize,
  kHandshakeBytes,
  kMeshVersion,
} from './handshake.js';

export class MeshAcceptor {
  private readonly server = net.createServer((socket) => this.onConnection(socket));
  readonly accepted = new Map<number, net.Socket>();
  /** "address: reason" of every refused connection, newest last (bounded). */
  readonly refused: string[] = [];
  private readonly handshaking = new Set<net.Socket>();
  private notify: (() => void) | null = null;

  constructor(
    private readonly rank: number,
    private readonly size: number,
    private readonly jobId: string,
  ) {}

  /** Listens on `host` with an ephemeral port; resolves with the port. */
  listen(host: string): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen({ host, port: 0 }, () => {
        this.server.off('error', reject);
        resolve((this.server.address() as net.AddressInfo).port);
      });
    });
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
    if (this.server.listening) this.server.close();
    for (const socket of this.handshaking) socket.destroy();
    this.handshaking.clear();
  }

  destroyAll(): void {
    this.stopListening();
    for (const socket of this.accepted.values()) socket.destroy();
  }

  private onConnection(socket: net.Socket): void {
    socket.setNoDelay(true);
    this.handshaking.add(socket);
    const remote = `${socket.remoteAddress}:${socket.remotePort}`;
    let received: Buffer = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      received = received.byteLength === 0 ? chunk : Buffer.concat([received, chunk]);
      if (received.byteLength < kHandshakeBytes) return;
      let length: number;
      try {
        length = helloLength(received);
      } catch (error) {
        this.refuse(socket, remote, (error as Error).message, null);
        return;
      }
      if (received.byteLength < length) return;
      socket.off('data', onData);
      if (received.byteLength > length) {
        this.refuse(socket, remote, 'sent bytes after its hello before our ack', null);
        return;
      }
      this.check(socket, remote, received);
    };
    socket.on('data', onData);
    // Errors end in 'close'; the transport installs its own handlers on accepted sockets.
    socket.on('error', () => {});
    socket.once('close', () => this.handshaking.delete(socket));
  }

  private check(socket: net.Socket, remote: string, bytes: Buffer): void {
    const hello = decodeHello(bytes);
    let status = kAckOk;
    let reason = '';
    if (hello.version !== kMeshVersion) [status, reason] = [kAckBadVersion, `handshake version ${hello.version}`];
    else if (hello.jobId !== this.jobId) [status, reason] = [kAckWrongJob, `job id "${hello.jobId}"`];
    else if (hello.size !== this.size) [status, reason] = [kAckWrongSize, `world size ${hello.size}`];
    else if (hello.rank >= this.size || hello.rank === this.rank) [status, reason] = [kAckBadRank, `rank ${hello.rank}`];
    else if (this.accepted.has(hello.rank)) [status, reason] = [kAckDuplicateRank, `duplicate rank ${hello.rank}`];
    if (status !== kAckOk) {
      this.refuse(socket, remote, reason, encodeAck(status, this.rank, this.size));
      return;
    }
    this.handshaking.delete(socket);
    this.accepted.set(hello.rank, socket);
    socket.write(encodeAck(kAckOk, this.rank, this.size));
    this.notify?.();
  }

  private refuse(socket: net.Socket, remote: string, reason: string, ack: Buffer | null): void {
    if (this.refused.length < 16) this.refused.push(`${remote}: ${reason}`);
    if (ack) socket.end(ack);
    else socket.destroy();
  }
}
