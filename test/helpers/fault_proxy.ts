/**
 * A TCP forwarder that injects network faults on purpose (this kernel has no netem): delay and
 * jitter, a bandwidth limit, a reset, a host that goes silent, a reader that stops reading, and
 * truncated or corrupted bytes. It listens on a port of its own and forwards every connection to
 * `target`; test/helpers/proxied_world.ts puts one in front of each rank's listener, so every
 * byte between ranks passes through one.
 *
 * Faults are switched on while the job runs (the handshake passes untouched unless a fault is on
 * from the start) and apply to every connection through the proxy, in both directions unless
 * the method says otherwise. Bytes stay in order: a chunk is written no earlier than the one
 * before it. The proxy reads ahead at most kMaxQueuedBytes per direction, so a slow link holds
 * the sender back through TCP as a real one does, instead of swallowing everything at once.
 */
import net from 'node:net';

const kMaxQueuedBytes = 256 * 1024;

interface Pipe {
  from: net.Socket;
  to: net.Socket;
  /** 'out': towards the target (the rank behind the proxy); 'in': from it. */
  direction: 'in' | 'out';
  /** Chunks waiting for their time, in order. */
  queue: Array<{ at: number; bytes: Buffer; truncate: boolean }>;
  queued: number;
  /** When the last queued chunk is written: the next one is never written earlier. */
  lastAt: number;
  timer: NodeJS.Timeout | undefined;
  frozen: boolean;
}

interface Pair {
  client: net.Socket;
  server: net.Socket;
  pipes: [Pipe, Pipe];
}

/**
 * Closes `socket` with a reset, or plainly once its end (FIN) has been sent: a reset while the
 * shutdown is pending leaves the native handle open, and the process then spins at 100 % CPU
 * when it exits instead of exiting (Node's teardown waits for that handle).
 */
function abort(socket: net.Socket): void {
  if (socket.writableEnded) socket.destroy();
  else socket.resetAndDestroy();
}

export interface ProxyTarget {
  host: string;
  port: number;
}

export class FaultProxy {
  private readonly server = net.createServer((socket) => this.accept(socket));
  private readonly pairs = new Set<Pair>();
  private delayMs = 0;
  private jitterMs = 0;
  private bytesPerSecond = 0;
  private corruptions: Array<{ direction: 'in' | 'out'; offset: number }> = [];
  private truncations: Array<'in' | 'out'> = [];
  /** Bytes forwarded so far, per direction. */
  readonly forwarded = { in: 0, out: 0 };
  /** Copies of the forwarded bytes, both directions in the order written, once record() was called. */
  private recording: Buffer[] | null = null;
  port = 0;

  private constructor(private readonly target: ProxyTarget) {}

  static async start(target: ProxyTarget): Promise<FaultProxy> {
    const proxy = new FaultProxy(target);
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
    proxy.port = (proxy.server.address() as net.AddressInfo).port;
    return proxy;
  }

  /** Every chunk waits `ms`, plus up to `jitterMs` more chosen at random (order kept). */
  delay(ms: number, jitterMs = 0): void {
    this.delayMs = ms;
    this.jitterMs = jitterMs;
  }

  /** Each direction of each connection carries at most `bytesPerSecond` (0: no limit). */
  limit(bytesPerSecond: number): void {
    this.bytesPerSecond = bytesPerSecond;
  }

  /** Resets every connection (RST on both sides), as a middlebox or a rebooted peer does. */
  reset(): void {
    for (const pair of this.pairs) {
      for (const pipe of pair.pipes) clearTimeout(pipe.timer);
      abort(pair.client);
      abort(pair.server);
    }
    this.pairs.clear();
  }

  /**
   * The target's host goes silent: nothing more is read or forwarded either way, and no
   * connection closes (a host that lost power, or a cut cable: no FIN, no RST).
   */
  silence(): void {
    for (const pair of this.pairs) for (const pipe of pair.pipes) this.freeze(pipe);
  }

  /** Nothing more is read or forwarded in `direction` (the receiver's buffers fill); the other way still flows. */
  stopReading(direction: 'in' | 'out'): void {
    for (const pair of this.pairs) this.freeze(pair.pipes[direction === 'out' ? 0 : 1]);
  }

  /** The next chunk in `direction` is cut in half, and the connection it travels on then closes (FIN). */
  truncateNext(direction: 'in' | 'out'): void {
    this.truncations.push(direction);
  }

  /** The next chunk in `direction` has its byte at `offset` (or its last byte, if shorter) inverted. */
  corruptNext(direction: 'in' | 'out', offset = 0): void {
    this.corruptions.push({ direction, offset });
  }

  /** From now on, keeps a copy of every byte forwarded either way (what a capture on the wire would see). */
  record(): void {
    this.recording ??= [];
  }

  /** What was forwarded since record(). */
  recorded(): Buffer {
    return Buffer.concat(this.recording ?? []);
  }

  async close(): Promise<void> {
    for (const pair of this.pairs) {
      for (const pipe of pair.pipes) clearTimeout(pipe.timer);
      pair.client.destroy();
      pair.server.destroy();
    }
    this.pairs.clear();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: net.Socket): void {
    const server = net.connect(this.target.port, this.target.host);
    const pipe = (from: net.Socket, to: net.Socket, direction: 'in' | 'out'): Pipe => ({
      from,
      to,
      direction,
      queue: [],
      queued: 0,
      lastAt: 0,
      timer: undefined,
      frozen: false,
    });
    const pair: Pair = { client, server, pipes: [pipe(client, server, 'out'), pipe(server, client, 'in')] };
    this.pairs.add(pair);
    client.setNoDelay(true);
    server.setNoDelay(true);
    // A closed or reset end is passed on as it came: a FIN as a FIN, an error as a reset.
    const closeBoth = (error?: Error) => {
      this.pairs.delete(pair);
      for (const p of pair.pipes) clearTimeout(p.timer);
      if (error) {
        abort(client);
        abort(server);
      }
    };
    client.on('error', closeBoth);
    server.on('error', closeBoth);
    for (const p of pair.pipes) {
      p.from.on('data', (chunk: Buffer) => this.forward(pair, p, chunk));
      p.from.on('end', () => {
        // Half-close in order: after the bytes already queued.
        const wait = Math.max(0, p.lastAt - performance.now()) + 1;
        setTimeout(() => p.to.end(), wait);
      });
    }
  }

  private freeze(pipe: Pipe): void {
    pipe.frozen = true;
    pipe.from.pause();
  }

  private forward(pair: Pair, pipe: Pipe, chunk: Buffer): void {
    if (pipe.frozen) return;
    const corruption = this.take(this.corruptions, (c) => c.direction === pipe.direction);
    if (corruption !== undefined) {
      const at = Math.min(corruption.offset, chunk.length - 1);
      chunk[at] = (chunk[at] as number) ^ 0xff;
    }
    const truncate = this.take(this.truncations, (d) => d === pipe.direction) !== undefined;
    const bytes = truncate ? chunk.subarray(0, Math.max(1, chunk.length >> 1)) : chunk;

    const now = performance.now();
    const wait = this.delayMs + Math.random() * this.jitterMs;
    const transmit = this.bytesPerSecond > 0 ? (bytes.length / this.bytesPerSecond) * 1000 : 0;
    const at = Math.max(pipe.lastAt, now + wait) + transmit;
    pipe.lastAt = at;
    pipe.queue.push({ at, bytes, truncate });
    pipe.queued += bytes.length;
    if (pipe.queued > kMaxQueuedBytes) pipe.from.pause();
    this.pump(pair, pipe);
  }

  /** Writes the chunks whose time has come, in order, and arms one timer for the next. */
  private pump(pair: Pair, pipe: Pipe): void {
    if (pipe.timer !== undefined) return;
    for (;;) {
      const next = pipe.queue[0];
      if (next === undefined || pipe.frozen || pipe.to.destroyed) return;
      const wait = next.at - performance.now();
      if (wait > 0) {
        pipe.timer = setTimeout(() => {
          pipe.timer = undefined;
          this.pump(pair, pipe);
        }, wait);
        return;
      }
      pipe.queue.shift();
      pipe.to.write(next.bytes);
      this.recording?.push(Buffer.from(next.bytes));
      this.forwarded[pipe.direction] += next.bytes.length;
      pipe.queued -= next.bytes.length;
      if (next.truncate) {
        this.pairs.delete(pair);
        pair.client.end();
        pair.server.end();
        return;
      }
      if (pipe.queued <= kMaxQueuedBytes && pipe.from.isPaused() && !pipe.frozen) pipe.from.resume();
    }
  }

  private take<T>(list: T[], match: (item: T) => boolean): T | undefined {
    const index = list.findIndex(match);
    if (index < 0) return undefined;
    return list.splice(index, 1)[0];
  }
}
