/**
 * A Store over a WebSocket to the launcher's store bridge (web_store_bridge.ts; the frames:
 * web_store_protocol.ts): how a browser rank meets the others (RINGREDUCE_STORE_URL). No Node
 * import: it runs in a page's worker.
 *
 * How it works: requests are pipelined by id; each waits for its reply with a deadline of its
 * own: a get, its timeout plus a grace (the bridge's store answers at the timeout itself, and
 * the client's timer only guards against a hung bridge); a set or an add, kAnswerMs. The
 * connection is authenticated by the launcher, which checks the token of the URL when the
 * WebSocket opens; nothing here proves anything. A closed connection fails every pending and
 * later call; close() rejects them with ShutdownError.
 */
import { ProtocolError, RingReduceError, ShutdownError, TimeoutError } from '../core/errors.js';
import { type ChannelLike, ChannelPort, whenOpen } from './channel.js';
import type { Store } from './store.js';
import {
  decodeReply,
  decodeText,
  encodeRequest,
  kWebOpAdd,
  kWebOpError,
  kWebOpGet,
  kWebOpOk,
  kWebOpSet,
  kWebOpTimeout,
  type WebStoreReply,
} from './web_store_protocol.js';

/** The bridge answers a get at its deadline; the client's own timer only guards against a hung bridge. */
const kGraceMs = 1000;
/** A set or an add is answered at once by a live bridge. */
const kAnswerMs = 30_000;

interface Pending {
  key: string;
  timeoutMs: number;
  resolve(reply: WebStoreReply): void;
  reject(error: Error): void;
  timer: ReturnType<typeof setTimeout>;
}

export class WebStoreClient implements Store {
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private failure: Error | null = null;

  private constructor(
    private readonly port: ChannelPort,
    private readonly where: string,
  ) {
    port.attach({
      message: (bytes) => this.onMessage(bytes),
      closed: (cause) => this.fail(new RingReduceError(`store connection to ${where} ${cause}`)),
    });
  }

  /**
   * A client over `channel` (a WebSocket to the bridge, possibly still connecting), once it is
   * open. `where` names the store in errors (its URL without the token). Rejects with
   * TimeoutError when it does not open within `timeoutMs`.
   */
  static async connect(channel: ChannelLike, where: string, timeoutMs: number): Promise<WebStoreClient> {
    const port = new ChannelPort(channel);
    try {
      await whenOpen(channel, performance.now() + timeoutMs, `the store at ${where}`);
    } catch (error) {
      channel.close();
      if (error instanceof TimeoutError)
        throw new TimeoutError(`the store at ${where} did not accept the connection within ${timeoutMs} ms`);
      throw new RingReduceError(`cannot connect to the store at ${where}: ${(error as Error).message}`);
    }
    return new WebStoreClient(port, where);
  }

  async set(key: string, value: Uint8Array): Promise<void> {
    await this.request(kWebOpSet, key, 0, value, kAnswerMs);
  }

  async get(key: string, timeoutMs: number): Promise<Uint8Array> {
    const ms = Math.max(0, Math.ceil(timeoutMs));
    return (await this.request(kWebOpGet, key, ms, new Uint8Array(0), ms + kGraceMs)).body;
  }

  async add(key: string, delta: number): Promise<number> {
    if (!Number.isSafeInteger(delta)) throw new RangeError(`store add: delta must be a safe integer, got ${delta}`);
    const reply = await this.request(kWebOpAdd, key, delta, new Uint8Array(0), kAnswerMs);
    if (!Number.isSafeInteger(reply.arg)) throw new ProtocolError(`the store at ${this.where} answered an add with ${reply.arg}`);
    return reply.arg;
  }

  async close(): Promise<void> {
    this.fail(new ShutdownError(`store client for ${this.where} was closed`));
  }

  private request(op: number, key: string, arg: number, value: Uint8Array, waitMs: number): Promise<WebStoreReply> {
    if (this.failure) return Promise.reject(this.failure);
    const id = this.nextId;
    this.nextId = this.nextId >= 0xffff_ffff ? 1 : this.nextId + 1;
    let bytes: Uint8Array<ArrayBuffer>;
    try {
      bytes = encodeRequest({ op: op as typeof kWebOpSet, id, key, arg, value });
    } catch (error) {
      return Promise.reject(error);
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(this.timeoutError(key, op === kWebOpGet ? arg : waitMs));
      }, waitMs);
      this.pending.set(id, { key, timeoutMs: arg, resolve, reject, timer });
      this.port.channel.send(bytes);
    });
  }

  private timeoutError(key: string, timeoutMs: number): TimeoutError {
    return new TimeoutError(`store key "${key}" was not set within ${timeoutMs} ms (store at ${this.where})`);
  }

  private onMessage(bytes: Uint8Array | null): void {
    let reply: WebStoreReply;
    try {
      if (bytes === null) throw new ProtocolError('a text message');
      reply = decodeReply(bytes);
    } catch (error) {
      this.fail(new RingReduceError(`bad reply from the store at ${this.where}: ${(error as Error).message}`));
      return;
    }
    if (reply.id === 0) {
      this.fail(new RingReduceError(`the store at ${this.where} closed the connection: ${decodeText(reply.body)}`));
      return;
    }
    const entry = this.pending.get(reply.id);
    if (entry === undefined) return; // the answer to a request that timed out here
    this.pending.delete(reply.id);
    clearTimeout(entry.timer);
    if (reply.op === kWebOpOk) entry.resolve(reply);
    else if (reply.op === kWebOpTimeout) entry.reject(this.timeoutError(entry.key, entry.timeoutMs));
    else if (reply.op === kWebOpError) entry.reject(new RingReduceError(`store at ${this.where}: ${decodeText(reply.body)}`));
  }

  private fail(error: Error): void {
    if (this.failure) return;
    this.failure = error;
    for (const entry of this.pending.values()) {
      clearTimeout(entry.timer);
      entry.reject(error);
    }
    this.pending.clear();
    this.port.channel.close();
  }
}
