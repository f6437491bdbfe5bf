/**
 * Full-mesh connect: turns a Store and a rank into one pair of connections per peer: TCP,
 * or Unix domain sockets between ranks on the same host.
 *
 * How it works:
 * 1. Listen on an ephemeral port (MeshAcceptor) and publish "host:port" under `addr/<rank>`;
 *    with `localSockets` (the default) also listen on a Unix socket and publish its path with
 *    this rank's same-host identity (local_socket.ts).
 * 2. For every peer: read its address from the store (waiting until it is there), dial it (its
 *    Unix socket when its identity equals ours and both sides allow it, since it streams
 *    faster than loopback TCP; TCP otherwise, or when the Unix dial fails) and run the
 *    handshake (handshake.ts: hello, challenge, response, ack), in which both sides prove they
 *    know the job secret. Meanwhile accept one connection from every peer.
 * 3. Barrier through the store, so that when connectMesh resolves on any rank, every rank's
 *    mesh is complete (and rank 0 may stop serving the store without stranding anyone).
 *
 * Why two connections per pair: the receive path lands large payloads straight in the
 * caller's destination (possibly SharedArrayBuffer memory) through the socket's `onread:
 * { buffer, callback }` option, which picks the buffer of every read. On Node 20 that option
 * only takes effect on sockets created by `net.connect`; `net.createServer` ignores it for
 * accepted sockets. So each rank receives only on connections it dialed and sends only on
 * connections it accepted: for peers a and b, a→b (dialed by a) carries b's frames to a, and
 * b→a carries a's frames to b. Each direction gets its own socket buffers and congestion
 * window, which costs nothing in throughput.
 *
 * The handshake, the `onread` receive and the transport above are the same on both kinds of
 * socket; `PeerLink.via` says which one a link uses. With `tls` the TCP links run TLS
 * (tls_links.ts) under the handshake; `tls.connect` honours `onread` as `net.connect` does.
 *
 * Every wait shares one deadline; a TimeoutError says which ranks did not call init() (no
 * address in the store), could not be reached, or did not connect to this rank.
 */
import type net from 'node:net';
import { performance } from 'node:perf_hooks';
import { InvalidArgumentError, PeerFailureError, ProtocolError, TimeoutError } from '../core/errors.js';
import { JobKey, newNonce } from './auth.js';
import { dial } from './dial.js';
import {
  checkAck,
  checkChallenge,
  dialerProof,
  ExactSink,
  encodeHello,
  encodeResponse,
  kAckBytes,
  kChallengeBytes,
  type Transcript,
  verifyAcceptor,
} from './handshake.js';
import { localSocketPath, sameHostIdentity } from './local_socket.js';
import { MeshAcceptor } from './mesh_acceptor.js';
import { barrier } from './mesh_barrier.js';
import { ReadPort } from './read_port.js';
import type { ReportLimit } from './report_limiter.js';
import type { Store } from './store.js';
import { kTlsHint, type TlsLinks } from './tls_links.js';

export interface MeshOptions {
  store: Store;
  rank: number;
  size: number;
  /** Interface to listen on for data connections ("0.0.0.0" for all). */
  host: string;
  /** Host the peers dial to reach us; defaults to `host`. */
  advertiseHost?: string;
  jobId: string;
  /** The job secret both ends of every connection prove they know (unset: the empty key). */
  key?: JobKey;
  /** Told about incoming connections refused (a stranger, a wrong secret): for the log, rate-limited. */
  onRefused?: (remote: string, reason: string) => void;
  /** How those reports are rate-limited (false: every one); default kDefaultReportLimit (report_limiter.ts). */
  reportLimit?: ReportLimit | false;
  /** One deadline for the whole connect, barrier included. */
  timeoutMs: number;
  /** Store key prefix; defaults to `mesh/<jobId>/`. */
  keyPrefix?: string;
  /**
   * Use Unix domain sockets to and from ranks on the same host (same boot, network and mount
   * namespace); false: TCP only, neither listening on nor dialing a Unix socket. Default true.
   */
  localSockets?: boolean;
  /** Run TLS (tls_links.ts) on every TCP link, dialed and accepted; Unix socket links stay plain. */
  tls?: TlsLinks;
}

/** How a rank is reached; published in the store as JSON under `<prefix>addr/<rank>`. */
interface Advertised {
  host: string;
  port: number;
  /** Present when the rank listens on a Unix socket: its same-host identity and path. */
  local?: { id: string; path: string };
}

/** The two connections to one peer, handshaken and ready for the transport. */
export interface PeerLink {
  peer: number;
  /** "host:port" the peer listens on, for error messages (also when `via` is 'unix'). */
  address: string;
  /** What the connection we dialed runs over (the peer chose for the one we accepted). */
  via: 'tcp' | 'unix';
  /** Dialed by us: the peer's frames arrive here, read through `recvPort`. */
  recvSocket: net.Socket;
  recvPort: ReadPort;
  /** Accepted from the peer: we write our frames here. */
  sendSocket: net.Socket;
}

class StageTimeout extends Error {
  constructor(
    readonly stage: 'address' | 'connect',
    readonly peer: number,
  ) {
    super(`${stage} of rank ${peer} timed out`);
  }
}

/** The store keys of a job's mesh: `<prefix>addr/<rank>` per rank, `<prefix>all-ready` at the end (mesh_barrier.ts). */
export function meshKeyPrefix(jobId: string): string {
  return `mesh/${jobId}/`;
}

/** Connects this rank to every other; resolves with one link per peer, ordered by rank. */
export async function connectMesh(options: MeshOptions): Promise<PeerLink[]> {
  const { rank, size, jobId } = options;
  if (!Number.isInteger(size) || size < 1) throw new InvalidArgumentError(`size must be a positive integer, got ${size}`);
  if (!Number.isInteger(rank) || rank < 0 || rank >= size) throw new InvalidArgumentError(`rank ${rank} is not in [0, ${size})`);
  if (size === 1) return [];
  const prefix = options.keyPrefix ?? meshKeyPrefix(jobId);
  const deadline = performance.now() + options.timeoutMs;
  const abort = new AbortController();
  const key = options.key ?? new JobKey(undefined);
  const acceptor = new MeshAcceptor({
    rank,
    size,
    jobId,
    key,
    onRefused: options.onRefused,
    reportLimit: options.reportLimit,
    ...(options.tls === undefined ? {} : { tls: options.tls }),
  });
  const dialed = new Map<number, Dialed>();
  const opened: net.Socket[] = [];
  try {
    const port = await acceptor.listen(options.host);
    const advertised: Advertised = { host: options.advertiseHost ?? options.host, port };
    const local = options.localSockets === false ? null : await listenLocal(acceptor, jobId, rank);
    if (local) advertised.local = local;
    await options.store.set(`${prefix}addr/${rank}`, Buffer.from(JSON.stringify(advertised)));
    const peers = [...Array(size).keys()].filter((p) => p !== rank);
    const dialing = peers.map((peer) =>
      dialPeer(options, key, prefix, local?.id ?? null, peer, deadline, abort.signal, opened).then(
        (link) => void dialed.set(peer, link),
        (error) => {
          // A timeout is reported with the others below; anything else is the answer right away.
          if (!(error instanceof StageTimeout)) abort.abort(error);
          throw error;
        },
      ),
    );
    const settled = await Promise.allSettled([...dialing, acceptor.whenComplete(deadline, abort.signal)]);
    if (abort.signal.aborted) throw abort.signal.reason;
    if (settled.some((s) => s.status === 'rejected')) {
      throw meshTimeout(options, settled, acceptor);
    }
    await barrier(options.store, prefix, rank, size, deadline, options.timeoutMs);
    return peers.map((peer) => {
      const link = dialed.get(peer);
      const sendSocket = acceptor.accepted.get(peer);
      if (!link || !sendSocket) throw new Error(`mesh invariant: rank ${peer} missing after a complete connect`);
      return { peer, address: link.address, via: link.via, recvSocket: link.socket, recvPort: link.port, sendSocket };
    });
  } catch (error) {
    if (!abort.signal.aborted) abort.abort(error);
    for (const socket of opened) socket.destroy();
    acceptor.destroyAll();
    throw error;
  } finally {
    acceptor.stopListening();
  }
}

/** Destroys every socket of `links` (for a caller that fails before handing them on). */
export function destroyLinks(links: readonly PeerLink[]): void {
  for (const link of links) {
    link.recvSocket.destroy();
    link.sendSocket.destroy();
  }
}

/** Listens on a Unix socket when this host has an identity and a path fits; null: TCP only. */
async function listenLocal(acceptor: MeshAcceptor, jobId: string, rank: number): Promise<Advertised['local'] | null> {
  const id = sameHostIdentity();
  const path = id === null ? null : localSocketPath(jobId, rank);
  if (id === null || path === null) return null;
  return (await acceptor.listenLocal(path)) ? { id, path } : null;
}

interface Dialed {
  socket: net.Socket;
  port: ReadPort;
  address: string;
  via: 'tcp' | 'unix';
}

/** `localId`: our same-host identity when we use Unix sockets, else null. */
async function dialPeer(
  options: MeshOptions,
  key: JobKey,
  prefix: string,
  localId: string | null,
  peer: number,
  deadline: number,
  signal: AbortSignal,
  opened: net.Socket[],
): Promise<Dialed> {
  let raw: Uint8Array;
  try {
    raw = await abortable(options.store.get(`${prefix}addr/${peer}`, remaining(deadline)), signal);
  } catch (error) {
    throw error instanceof TimeoutError ? new StageTimeout('address', peer) : error;
  }
  const { host, port, local } = parseAddress(raw, peer);
  const address = `${host}:${port}`;
  const who = `rank ${peer} at ${address}`;
  // Each handshake message from the acceptor is read by a sink of its exact size, so the
  // frames that follow the ack stay in the kernel for the transport's receiver.
  let onMessage: (bytes: Buffer) => void = () => {};
  const next = () =>
    new Promise<Buffer>((resolve) => {
      onMessage = resolve;
    });
  let message = next();
  const readPort = new ReadPort(new ExactSink(kChallengeBytes, (bytes) => onMessage(bytes)));
  const target = { host, port, deadline, what: `rank ${peer}`, onread: readPort.onread, signal, tls: options.tls };
  let socket: net.Socket | null = null;
  let via: Dialed['via'] = 'tcp';
  if (localId !== null && local !== undefined && local.id === localId) {
    // A Unix dial that fails (the file is gone, another user's socket) falls back to TCP.
    socket = await dial({ ...target, path: local.path }).catch(() => null);
    signal.throwIfAborted();
    if (socket) via = 'unix';
  }
  try {
    socket ??= await dial(target);
  } catch (error) {
    throw error instanceof TimeoutError
      ? new StageTimeout('connect', peer)
      : new PeerFailureError(`cannot connect to ${who}: ${(error as Error).message}`, peer);
  }
  opened.push(socket);
  socket.on('error', () => {}); // surfaces as 'close' below, then as the transport's failure
  const closed = new Promise<never>((_, reject) => {
    // A peer that expects TLS when we speak none (or the reverse) hangs up here.
    socket.once('close', () =>
      reject(new PeerFailureError(`${who} closed the connection during the handshake (${kTlsHint})`, peer)),
    );
  });
  closed.catch(() => {}); // only raced below
  const receive = () => abortable(Promise.race([message, closed]), signal, deadline, () => new StageTimeout('connect', peer));
  const ourNonce = newNonce();
  socket.write(encodeHello(options.rank, options.size, options.jobId, ourNonce));
  const challenge = checkChallenge(await receive(), peer, options.size, who);
  const transcript: Transcript = {
    jobId: options.jobId,
    size: options.size,
    dialer: options.rank,
    acceptor: peer,
    dialerNonce: ourNonce,
    acceptorNonce: Buffer.from(challenge.nonce),
  };
  if (!verifyAcceptor(key, transcript, challenge.proof)) {
    throw new ProtocolError(
      `${who} could not prove it knows the job secret: it is not a rank of this job, or RINGREDUCE_SECRET differs`,
    );
  }
  message = next();
  readPort.attach(new ExactSink(kAckBytes, (bytes) => onMessage(bytes)));
  socket.resume();
  socket.write(encodeResponse(options.rank, options.size, dialerProof(key, transcript)));
  checkAck(await receive(), peer, options.size, who);
  return { socket, port: readPort, address, via };
}

function parseAddress(raw: Uint8Array, peer: number): Advertised {
  try {
    const value = JSON.parse(Buffer.from(raw).toString('utf8')) as { host?: unknown; port?: unknown; local?: unknown };
    if (
      typeof value.host === 'string' &&
      Number.isInteger(value.port) &&
      (value.port as number) > 0 &&
      (value.port as number) < 65536
    ) {
      const parsed: Advertised = { host: value.host, port: value.port as number };
      const local = value.local as { id?: unknown; path?: unknown } | undefined;
      // A malformed `local` only costs the Unix socket: the peer is still reachable over TCP.
      if (typeof local?.id === 'string' && typeof local.path === 'string' && local.path !== '') {
        parsed.local = { id: local.id, path: local.path };
      }
      return parsed;
    }
  } catch {}
  throw new ProtocolError(`rank ${peer} published a malformed address in the store`);
}

function meshTimeout(options: MeshOptions, settled: PromiseSettledResult<unknown>[], acceptor: MeshAcceptor): TimeoutError {
  const byStage = { address: [] as number[], connect: [] as number[] };
  for (const s of settled) {
    if (s.status === 'rejected' && s.reason instanceof StageTimeout) byStage[s.reason.stage].push(s.reason.peer);
  }
  const parts: string[] = [];
  if (byStage.address.length > 0) parts.push(`${ranksText(byStage.address)} did not call init()`);
  if (byStage.connect.length > 0) parts.push(`could not connect to ${ranksText(byStage.connect)}`);
  const missing = acceptor.missing();
  if (missing.length > 0) parts.push(`${ranksText(missing)} did not connect to rank ${options.rank}`);
  if (acceptor.refused.length > 0) parts.push(`refused connections: ${acceptor.refused.join('; ')}`);
  return new TimeoutError(
    `start-up of rank ${options.rank} (of ${options.size}, job ${options.jobId}) timed out after ${Math.round(options.timeoutMs)} ms: ${parts.join('; ')}`,
  );
}

/** "rank 2", "ranks 2, 3". */
function ranksText(ranks: readonly number[]): string {
  return `${ranks.length === 1 ? 'rank' : 'ranks'} ${ranks.join(', ')}`;
}

function remaining(deadline: number): number {
  return Math.max(0, Math.ceil(deadline - performance.now()));
}

/** `promise`, or a rejection on abort (its reason) or at `deadline` (`onTimeout()`). */
function abortable<T>(promise: Promise<T>, signal: AbortSignal, deadline?: number, onTimeout?: () => Error): Promise<T> {
  return new Promise((resolve, reject) => {
    const done = () => {
      signal.removeEventListener('abort', onAbort);
      if (timer) clearTimeout(timer);
    };
    const onAbort = () => {
      done();
      reject(signal.reason);
    };
    const timer =
      deadline === undefined
        ? null
        : setTimeout(() => {
            done();
            reject(onTimeout?.());
          }, remaining(deadline));
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        done();
        resolve(value);
      },
      (error) => {
        done();
        reject(error);
      },
    );
  });
}
