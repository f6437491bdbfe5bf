/**
 * The server side of the store for browsers: serves one accepted WebSocket (a browser rank's
 * WebStoreClient) against a Store, typically a TcpStoreClient of the launcher's TcpStoreServer,
 * so browser and Node ranks meet in the same key space. Frames: web_store_protocol.ts.
 *
 * Authentication is not done here: the launcher checks the job's token on the HTTP upgrade and
 * hands over only sockets that passed (the launcher's WebSocket server should also cap a
 * message's size, ws's `maxPayload`, at kMaxWebStoreMessageBytes). Input is still untrusted:
 * each message's size is checked before it is parsed, a client has at most `maxPending` requests
 * open, and anything malformed is answered with an error of id 0 and closes that connection
 * only; the bridge never throws on input. A get that is still waiting when its connection
 * closes runs on in the store until its own deadline; its answer is dropped.
 */
import { ProtocolError, TimeoutError } from '../core/errors.js';
import { type ChannelLike, ChannelPort, isOpen } from './channel.js';
import type { Store } from './store.js';
import {
  decodeRequest,
  encodeErrorReply,
  encodeReply,
  kMaxWebStoreMessageBytes,
  kWebOpGet,
  kWebOpOk,
  kWebOpSet,
  kWebOpTimeout,
  type WebStoreRequest,
} from './web_store_protocol.js';

export interface WebStoreBridgeOptions {
  /** Largest request; default kMaxWebStoreMessageBytes. */
  maxMessageBytes?: number;
  /** Requests open at once per connection (gets waiting for their key); default kMaxPending. */
  maxPending?: number;
  /** Longest wait a get may ask for; longer ones are cut to it. Default kMaxGetMs. */
  maxGetMs?: number;
  /** Told about every connection closed for a protocol violation (for the launcher's log). */
  onProtocolError?(error: ProtocolError, remote: string): void;
}

const kMaxPending = 4096;
/** A day: far beyond any start-up deadline, and within what a timer can hold. */
const kMaxGetMs = 24 * 60 * 60 * 1000;
const kEmpty = new Uint8Array(0);

/** Serves `channel` (accepted, open, authenticated by the caller) against `store` until it closes. */
export class WebStoreBridge {
  private readonly port: ChannelPort;
  private pending = 0;
  private closed = false;
  private readonly maxMessageBytes: number;
  private readonly maxPending: number;
  private readonly maxGetMs: number;

  constructor(
    channel: ChannelLike,
    private readonly store: Store,
    private readonly remote: string,
    private readonly options: WebStoreBridgeOptions = {},
  ) {
    this.maxMessageBytes = options.maxMessageBytes ?? kMaxWebStoreMessageBytes;
    this.maxPending = options.maxPending ?? kMaxPending;
    this.maxGetMs = options.maxGetMs ?? kMaxGetMs;
    this.port = new ChannelPort(channel);
    this.port.attach({
      message: (bytes) => this.onMessage(bytes),
      closed: () => {
        this.closed = true;
      },
    });
  }

  /** Closes the connection (the launcher's shutdown). */
  close(): void {
    this.closed = true;
    this.port.channel.close();
  }

  private onMessage(bytes: Uint8Array | null): void {
    if (this.closed) return;
    let request: WebStoreRequest;
    try {
      if (bytes === null) throw new ProtocolError('a text message; the store speaks binary');
      if (bytes.byteLength > this.maxMessageBytes) {
        throw new ProtocolError(`a request of ${bytes.byteLength} bytes exceeds the limit of ${this.maxMessageBytes}`);
      }
      request = decodeRequest(bytes);
      if (this.pending >= this.maxPending) throw new ProtocolError(`more than ${this.maxPending} requests open at once`);
    } catch (error) {
      this.violation(error instanceof ProtocolError ? error : new ProtocolError(String(error)));
      return;
    }
    this.pending++;
    this.serve(request).then(
      ([op, arg, body]) => this.reply(encodeReply(op, request.id, arg, body)),
      (error: Error) =>
        this.reply(
          error instanceof TimeoutError
            ? encodeReply(kWebOpTimeout, request.id, 0, kEmpty)
            : encodeErrorReply(request.id, error.message),
        ),
    );
  }

  private async serve(request: WebStoreRequest): Promise<[number, number, Uint8Array]> {
    if (request.op === kWebOpSet) {
      await this.store.set(request.key, request.value.slice());
      return [kWebOpOk, 0, kEmpty];
    }
    if (request.op === kWebOpGet) return [kWebOpOk, 0, await this.store.get(request.key, Math.min(request.arg, this.maxGetMs))];
    return [kWebOpOk, await this.store.add(request.key, request.arg), kEmpty];
  }

  private reply(bytes: Uint8Array<ArrayBuffer>): void {
    this.pending--;
    if (!this.closed && isOpen(this.port.channel)) this.port.channel.send(bytes);
  }

  private violation(error: ProtocolError): void {
    this.options.onProtocolError?.(error, this.remote);
    if (isOpen(this.port.channel)) this.port.channel.send(encodeErrorReply(0, error.message));
    this.close();
  }
}
