/**
 * Full-mesh connect of a web job: one authenticated channel per pair of ranks, through the
 * job's store, in Node and in a browser alike.
 *
 * How it works:
 * 1. A rank that can listen (a Node rank: LinkOpeners.listen) starts a WebSocket listener, and
 *    every rank publishes what it offers under `<prefix>offer/<rank>`: `{"url":"ws://host:port"}`,
 *    or `{}` (a browser rank: a page cannot listen).
 * 2. For each peer, once its offer is read, the pair's rule:
 *    - one of the two has a URL: the other dials it (a browser dials a Node rank);
 *    - both have one: the higher rank dials the lower. Node ranks talk WebSocket to each other
 *      too, rather than TCP: one kind of link in a web job, one code path, and the same
 *      transport in both processes;
 *    - neither: an RTCDataChannel (LinkOpeners.dataChannel), the lower rank as the offerer,
 *      signalling through the store (store_signal.ts).
 *    The dialer (or offerer) and the acceptor (or answerer) then run the handshake
 *    (handshake.ts): both prove they know the job secret, and the acceptor checks that the
 *    dialer is a rank that should dial it.
 * 3. A barrier through the store (rendezvous/mesh_barrier.ts): when connectWebMesh resolves on
 *    any rank, every rank's mesh is complete. The listener then stops accepting.
 *
 * One deadline covers all of it; a TimeoutError names the ranks that did not publish an offer,
 * could not be reached, did not connect to us, or whose data channel did not open, and the
 * connections refused meanwhile. A refusal by a peer (wrong secret, job or size) fails at once.
 * A WebSocket carries chunks of 1 MiB, a data channel 64 KiB (Chromium refuses messages over
 * 256 KiB on a data channel).
 */
import { InvalidArgumentError, PeerFailureError, ProtocolError, TimeoutError } from '../../core/errors.js';
import { type ChannelLike, ChannelPort, type ChannelTraits, kDefaultTraits, whenOpen } from '../../rendezvous/channel.js';
import { barrier } from '../../rendezvous/mesh_barrier.js';
import { type ReportLimit, ReportLimiter } from '../../rendezvous/report_limiter.js';
import type { Store } from '../../rendezvous/store.js';
import {
  type Admission,
  acceptLink,
  dialLink,
  kAckBadRank,
  kAckOk,
  kAckUnexpectedRank,
  type LinkIdentity,
  Refused,
} from './handshake.js';
import type { WebJobKey } from './link_auth.js';
import type { LinkListener, LinkOpeners } from './openers.js';
import { storeSignal } from './store_signal.js';
import type { WebLink } from './web_transport.js';

export interface WebMeshOptions {
  store: Store;
  rank: number;
  size: number;
  jobId: string;
  key: WebJobKey;
  openers: LinkOpeners;
  /** Where this rank listens, and the host of its URL (Node ranks: required when openers.listen is set). */
  host?: string;
  /** One deadline for the whole connect, barrier included. */
  timeoutMs: number;
  /** Store key prefix; default webMeshKeyPrefix(jobId). */
  keyPrefix?: string;
  /** Told about incoming connections refused (a stranger, a wrong secret): for the log, rate-limited. */
  onRefused?: (remote: string, reason: string) => void;
  /** How those reports are rate-limited (false: every one); default that of report_limiter.ts. */
  reportLimit?: ReportLimit | false;
}

/** What a rank publishes (as JSON) under `<prefix>offer/<rank>`. */
interface Offer {
  url?: string;
}

/** The chunk size and high-water mark of each kind of link (sender.ts). */
export const kWebSocketLink = { chunkBytes: 1024 * 1024, highWaterBytes: 8 * 1024 * 1024 } as const;
/**
 * A browser's WebSocket sends (browser_openers.ts): Chromium carries messages of a few hundred
 * KiB several times faster than 1 MiB ones from a tab to Node (docs/browser.md has the figures),
 * so a browser rank cuts its sends smaller. The receiving side takes chunks of any size.
 */
export const kBrowserWebSocketLink = { chunkBytes: 256 * 1024, highWaterBytes: 8 * 1024 * 1024 } as const;
export const kDataChannelLink = { chunkBytes: 64 * 1024, highWaterBytes: 1024 * 1024 } as const;
/** The largest channel message a web link carries: a chunk, or an inline frame (smaller). Listeners may refuse more. */
export const kMaxChannelMessageBytes = kWebSocketLink.chunkBytes;
/** How long a connection to the listener has for the handshake. */
const kAcceptTimeoutMs = 10_000;
/** Connections in the handshake at once; more are closed at once (a flood gets no memory). */
const kMaxHandshaking = 64;
/** Between dial attempts: a URL that refuses may be a listener not yet up, or gone for good. */
const kRedialMs = [50, 100, 250, 500, 1000] as const;

export function webMeshKeyPrefix(jobId: string): string {
  return `web/${jobId}/`;
}

class StageTimeout extends Error {
  constructor(
    readonly stage: 'offer' | 'connect' | 'accept' | 'data channel',
    readonly peer: number,
  ) {
    super(`${stage} of rank ${peer} timed out`);
  }
}

const kUtf8Encoder = new TextEncoder();
const kUtf8 = new TextDecoder();

/** Connects this rank to every other; resolves with one link per peer, ordered by rank. */
export async function connectWebMesh(options: WebMeshOptions): Promise<WebLink[]> {
  const { rank, size } = options;
  if (!Number.isInteger(size) || size < 1) throw new InvalidArgumentError(`size must be a positive integer, got ${size}`);
  if (!Number.isInteger(rank) || rank < 0 || rank >= size) throw new InvalidArgumentError(`rank ${rank} is not in [0, ${size})`);
  if (size === 1) return [];
  const mesh = new MeshRun(options);
  try {
    return await mesh.run();
  } catch (error) {
    mesh.closeAll();
    throw error;
  } finally {
    await mesh.stop();
  }
}

/** One connect: its listener, the channels it opened, the links made so far. */
class MeshRun {
  private readonly deadline: number;
  private readonly prefix: string;
  private readonly identity: LinkIdentity;
  private readonly traits: ChannelTraits;
  private readonly peers: number[];
  private listener: LinkListener | null = null;
  private offers = new Map<number, Promise<Offer>>();
  private readonly links = new Map<number, WebLink>();
  private readonly claimed = new Set<number>();
  private readonly arrivals = new Map<number, (link: WebLink) => void>();
  private readonly opened: ChannelLike[] = [];
  private readonly refused: string[] = [];
  private readonly reports: ReportLimiter;
  private handshaking = 0;
  private failure: Error | null = null;
  private readonly aborted: Promise<never>;
  private abort: (error: Error) => void = () => {};

  constructor(private readonly options: WebMeshOptions) {
    this.deadline = performance.now() + options.timeoutMs;
    this.prefix = options.keyPrefix ?? webMeshKeyPrefix(options.jobId);
    this.identity = { rank: options.rank, size: options.size, jobId: options.jobId, key: options.key };
    this.traits = { ...kDefaultTraits, ...options.openers.traits };
    this.peers = [...Array(options.size).keys()].filter((p) => p !== options.rank);
    this.reports = new ReportLimiter(options.reportLimit);
    this.aborted = new Promise<never>((_, reject) => {
      this.abort = (error) => {
        this.failure ??= error;
        reject(error);
      };
    });
    this.aborted.catch(() => {});
  }

  async run(): Promise<WebLink[]> {
    const { openers, store, rank, size, timeoutMs } = this.options;
    const ours: Offer = {};
    if (openers.listen) {
      if (this.options.host === undefined) throw new InvalidArgumentError('a rank that listens needs a host for its URL');
      this.listener = await openers.listen(this.options.host);
      this.listener.onChannel((channel, remote) => this.accept(channel, remote));
      ours.url = this.listener.url;
    }
    // Read before ours is out: a peer may dial as soon as it sees our URL, and its admission reads its offer.
    this.offers = new Map(this.peers.map((p) => [p, this.readOffer(p)]));
    for (const offer of this.offers.values()) offer.catch(() => {}); // each is awaited below
    await store.set(`${this.prefix}offer/${rank}`, kUtf8Encoder.encode(JSON.stringify(ours)));
    const settled = await Promise.allSettled(this.peers.map((p) => this.connect(p, ours)));
    if (this.failure) throw this.failure;
    const timeouts = settled.flatMap((s) => (s.status === 'rejected' ? [s.reason as unknown] : []));
    const other = timeouts.find((e) => !(e instanceof StageTimeout));
    if (other !== undefined) throw other;
    if (timeouts.length > 0) throw this.timeout(timeouts as StageTimeout[]);
    await barrier(store, this.prefix, rank, size, this.deadline, timeoutMs);
    return this.peers.map((p) => this.links.get(p) as WebLink);
  }

  /** Stops accepting (the links made stay open). */
  async stop(): Promise<void> {
    this.reports.close();
    await this.listener?.close();
  }

  /** Closes every channel this run opened or accepted (the connect failed). */
  closeAll(): void {
    this.failure ??= new Error('the web mesh connect failed');
    for (const channel of this.opened) channel.close();
    for (const link of this.links.values()) link.port.channel.close();
  }

  private async readOffer(peer: number): Promise<Offer> {
    let raw: Uint8Array;
    try {
      raw = await this.options.store.get(`${this.prefix}offer/${peer}`, this.remaining());
    } catch (error) {
      throw error instanceof TimeoutError ? new StageTimeout('offer', peer) : error;
    }
    try {
      const value = JSON.parse(kUtf8.decode(raw)) as { url?: unknown };
      if (value.url === undefined) return {};
      if (typeof value.url === 'string' && /^wss?:\/\//.test(value.url)) return { url: value.url };
    } catch {}
    throw new ProtocolError(`rank ${peer} published a malformed offer in the store`);
  }

  /** The link to `peer` by the pair's rule (see the header). */
  private async connect(peer: number, ours: Offer): Promise<void> {
    const { rank } = this.options;
    const theirs = await Promise.race([this.offers.get(peer) as Promise<Offer>, this.aborted]);
    let link: WebLink;
    if (theirs.url !== undefined && (ours.url === undefined || peer < rank)) link = await this.dial(peer, theirs.url);
    else if (ours.url !== undefined) link = await this.arrival(peer);
    else link = await this.dataChannel(peer);
    this.links.set(peer, link);
  }

  /** Dials `url` until it opens (a listener may refuse for a moment), then the dialer's handshake. */
  private async dial(peer: number, url: string): Promise<WebLink> {
    const who = `rank ${peer} at ${url}`;
    for (let attempt = 0; ; attempt++) {
      const channel = this.options.openers.dial(url);
      this.opened.push(channel);
      const port = new ChannelPort(channel);
      try {
        await Promise.race([whenOpen(channel, this.deadline, who), this.aborted]);
      } catch (error) {
        channel.close();
        if (this.failure) throw this.failure;
        const pause = kRedialMs[Math.min(attempt, kRedialMs.length - 1)] as number;
        if (error instanceof TimeoutError || this.remaining() <= pause) throw new StageTimeout('connect', peer);
        await new Promise((resolve) => setTimeout(resolve, pause));
        continue;
      }
      await this.handshake(peer, () => dialLink(port, this.identity, peer, who, this.deadline), 'connect');
      const { chunkBytes, highWaterBytes } = this.options.openers.webSocketLink ?? kWebSocketLink;
      return { peer, port, address: url, chunkBytes, highWaterBytes, traits: this.traits };
    }
  }

  /** Waits for `peer` to dial this rank's listener (accept() hands the link over). */
  private arrival(peer: number): Promise<WebLink> {
    const link = this.links.get(peer);
    if (link) return Promise.resolve(link);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new StageTimeout('accept', peer)), this.remaining());
      this.arrivals.set(peer, (arrived) => {
        clearTimeout(timer);
        resolve(arrived);
      });
      this.aborted.catch((error) => {
        clearTimeout(timer);
        reject(error);
      });
    });
  }

  private async dataChannel(peer: number): Promise<WebLink> {
    const { openers, rank, store } = this.options;
    if (openers.dataChannel === undefined) {
      throw new InvalidArgumentError(
        `ranks ${rank} and ${peer} both publish no URL, so they need a data channel, and rank ${rank} has no way to open one (LinkOpeners.dataChannel)`,
      );
    }
    const offerer = rank < peer;
    const signal = storeSignal(store, this.prefix, rank, peer);
    const opening = openers.dataChannel(peer, offerer, signal);
    // One that opens after the connect gave up is closed.
    opening.then(
      (late) => this.failure && late.close(),
      () => {},
    );
    let timer: ReturnType<typeof setTimeout> | undefined;
    const expired = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new StageTimeout('data channel', peer)), this.remaining());
    });
    let channel: ChannelLike;
    try {
      channel = await Promise.race([opening, this.aborted, expired]);
    } catch (error) {
      if (this.failure || error instanceof StageTimeout) throw error;
      if (error instanceof TimeoutError) throw new StageTimeout('data channel', peer);
      throw new PeerFailureError(`cannot open a data channel to rank ${peer}: ${(error as Error).message}`, peer);
    } finally {
      clearTimeout(timer);
    }
    this.opened.push(channel);
    const port = new ChannelPort(channel);
    const who = `rank ${peer} (data channel)`;
    try {
      await Promise.race([whenOpen(channel, this.deadline, who), this.aborted]);
    } catch (error) {
      if (this.failure) throw this.failure;
      throw error instanceof TimeoutError
        ? new StageTimeout('data channel', peer)
        : new PeerFailureError(`${who}: ${(error as Error).message}`, peer);
    }
    const link: WebLink = { peer, port, address: 'data channel', ...kDataChannelLink, traits: this.traits };
    if (offerer) await this.handshake(peer, () => dialLink(port, this.identity, peer, who, this.deadline), 'data channel');
    else {
      const only: Admission = {
        expects: async (r) => (r === peer ? kAckOk : kAckUnexpectedRank),
        claim: (r) => r === peer,
      };
      await this.handshake(peer, () => acceptLink(port, this.identity, only, who, this.deadline), 'data channel');
    }
    return link;
  }

  /** Runs a handshake: a timeout counts as `stage` of `peer`, a refusal fails the whole connect. */
  private async handshake(peer: number, run: () => Promise<unknown>, stage: 'connect' | 'data channel'): Promise<void> {
    try {
      await Promise.race([run(), this.aborted]);
    } catch (error) {
      if (this.failure) throw this.failure;
      if (error instanceof TimeoutError) throw new StageTimeout(stage, peer);
      const refusal = error instanceof Refused ? new ProtocolError(error.message) : (error as Error);
      this.abort(refusal);
      throw refusal;
    }
  }

  /** An incoming channel on the listener: the acceptor's handshake, then its rank's link. */
  private accept(channel: ChannelLike, remote: string): void {
    const port = new ChannelPort(channel);
    if (this.failure || this.handshaking >= kMaxHandshaking) {
      channel.close();
      return;
    }
    this.handshaking++;
    this.opened.push(channel);
    const admission: Admission = {
      expects: (r) => this.expects(r),
      claim: (r) => {
        if (this.claimed.has(r)) return false;
        this.claimed.add(r);
        return true;
      },
    };
    const deadline = Math.min(this.deadline, performance.now() + kAcceptTimeoutMs);
    acceptLink(port, this.identity, admission, remote, deadline).then(
      (peer) => {
        this.handshaking--;
        const link: WebLink = { peer, port, address: remote, ...kWebSocketLink, traits: this.traits };
        this.links.set(peer, link);
        this.arrivals.get(peer)?.(link);
      },
      (error) => {
        this.handshaking--;
        const reason = error instanceof Refused ? error.reason : (error as Error).message;
        if (this.refused.length < 16) this.refused.push(`${remote}: ${reason}`);
        this.reports.offer(remote, (note) => this.options.onRefused?.(remote, `${reason}${note}`));
      },
    );
  }

  /** Whether `peer` should dial this rank: it has no URL, or the higher rank dials (the header). */
  private async expects(peer: number): Promise<number> {
    const offer = this.offers.get(peer);
    if (offer === undefined) return kAckBadRank;
    try {
      const theirs = await offer;
      return theirs.url === undefined || peer > this.options.rank ? kAckOk : kAckUnexpectedRank;
    } catch {
      return kAckUnexpectedRank;
    }
  }

  private timeout(timeouts: readonly StageTimeout[]): TimeoutError {
    const { rank, jobId, size, timeoutMs } = this.options;
    const ranks = (stage: StageTimeout['stage']) => timeouts.filter((t) => t.stage === stage).map((t) => t.peer);
    const parts: string[] = [];
    const offer = ranks('offer');
    const connect = ranks('connect');
    const accept = ranks('accept');
    const data = ranks('data channel');
    if (offer.length > 0) parts.push(`ranks [${offer.join(', ')}] did not publish their offer`);
    if (connect.length > 0) parts.push(`could not reach and handshake with ranks [${connect.join(', ')}]`);
    if (accept.length > 0) parts.push(`ranks [${accept.join(', ')}] did not connect to us`);
    if (data.length > 0) parts.push(`data channels to ranks [${data.join(', ')}] did not open`);
    if (this.refused.length > 0) parts.push(`refused connections: ${this.refused.join('; ')}`);
    return new TimeoutError(
      `web mesh of rank ${rank} (job "${jobId}", size ${size}) incomplete after ${timeoutMs} ms: ${parts.join('; ')}`,
    );
  }

  private remaining(): number {
    return Math.max(0, Math.ceil(this.deadline - performance.now()));
  }
}
