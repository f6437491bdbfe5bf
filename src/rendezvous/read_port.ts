/**
 * ReadPort: the hand-over point of a dialed socket's receive path.
 *
 * Node fixes a socket's `onread` option when the socket is created, but the code that reads
 * from it changes over its life: first the mesh handshake (which reads the acceptor's ack),
 * then the transport's receiver. The port is installed as `onread` once and forwards to the
 * current sink.
 *
 * Node's contract for `onread: { buffer: fn, callback }`, which sinks rely on: `buffer()` is
 * called once when the handle is created and again after every callback; the kernel writes the
 * next read into the array it returned; `callback(nread, buf)` is then called with that same
 * array object. An empty array would make libuv fail the read with ENOBUFS, so a sink must never
 * return one. Returning false from the callback stops reading until `socket.resume()`.
 *
 * After a hand-over the first read may land in the previous sink's array; the new sink sees a
 * `buf` it did not hand out and must copy from it.
 */
import type net from 'node:net';

export interface ReadSink {
  buffer(): Uint8Array;
  /** Returns false to stop reading (the socket is then paused until resumed). */
  onRead(nread: number, buf: Uint8Array): boolean;
}

export class ReadPort {
  private sink: ReadSink;
  readonly onread: net.OnReadOpts = {
    buffer: () => this.sink.buffer(),
    callback: (nread, buf) => this.sink.onRead(nread, buf),
  };

  constructor(initial: ReadSink) {
    this.sink = initial;
  }

  attach(sink: ReadSink): void {
    this.sink = sink;
  }
}
