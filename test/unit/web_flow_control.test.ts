/**
 * Flow control of the web transport (src/transport/web/sender.ts) over a real loopback WebSocket
 * whose reader stops (ws's pause(): the socket is no longer read, as a stopped page or process):
 * the send waits, the bytes buffered on our side stay within the high-water mark and a chunk
 * whatever the size of the message, the transfer completes once the peer reads again, and a peer
 * that never does is named by the send's deadline. The same with a channel that announces its
 * drain with 'bufferedamountlow' (an RTCDataChannel does; here a WebSocket wrapped to do so).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { WebSocket } from 'ws';
import { PeerFailureError, TimeoutError } from '../../src/core/errors.js';
import type { ChannelLike, ChannelPort, LowWaterEvent } from '../../src/rendezvous/channel.js';
import { WebTransport } from '../../src/transport/web/web_transport.js';
import { bigPattern, equalBytes } from './tcp_test_helpers.js';
import { transportPair, wsPair } from './web_test_helpers.js';

const kChunk = 64 * 1024;
const kHighWater = 256 * 1024;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('web transport: flow control', () => {
  it('a peer that stops reading: the send waits, our buffer stays under the high-water mark, and completes once it reads', async () => {
    const pair = await transportPair({ chunkBytes: kChunk, highWaterBytes: kHighWater });
    const [a, b] = pair.transports;
    const [ours, theirs] = pair.sockets;
    try {
      theirs.pause();
      const length = 32 * 1024 * 1024;
      const data = bigPattern(length, 5);
      let done = false;
      const sent = a.send(1, 9, data).then(() => {
        done = true;
      });
      let most = 0;
      for (let i = 0; i < 30; i++) {
        await sleep(10);
        most = Math.max(most, ours.bufferedAmount);
      }
      assert.equal(done, false, 'the send waits for the reader');
      // Once the kernel's buffers are full, ours fills up to the mark and no further.
      assert.ok(most >= kHighWater && most <= kHighWater + kChunk, `at most ${most} bytes buffered on our side`);
      const into = new Uint8Array(length);
      const received = b.recv(0, 9, into);
      theirs.resume();
      await Promise.all([sent, received]);
      assert.ok(equalBytes(into, data));
    } finally {
      await pair.close();
    }
  });

  it('a peer that never reads again: the send times out naming the peer and the tag, and the link is torn down', async () => {
    const pair = await transportPair({ chunkBytes: kChunk, highWaterBytes: kHighWater, ioTimeoutMs: 300 });
    const [a] = pair.transports;
    try {
      pair.sockets[1].pause();
      const started = performance.now();
      await assert.rejects(
        a.send(1, 44, bigPattern(32 * 1024 * 1024, 1)),
        (e: unknown) => e instanceof TimeoutError && /send to rank 1 .* with tag 44 made no progress/.test(e.message),
      );
      assert.ok(performance.now() - started >= 290);
      await assert.rejects(a.send(1, 45, new Uint8Array(1)), PeerFailureError, 'later sends fail');
    } finally {
      await pair.close();
    }
  });

  it("a channel with a 'bufferedamountlow' event: the sender waits for the event, not a timer, and the transfer completes", async () => {
    const { server, client, sockets } = await wsPair();
    const lowWater = new LowWaterSocket(sockets[0]);
    const traits = { sendsSharedViews: true, retainsSentBytes: true, sendCallback: false };
    const link = (peer: number, port: ChannelPort) => ({
      peer,
      port,
      address: 'test',
      chunkBytes: kChunk,
      highWaterBytes: kHighWater,
      traits,
    });
    // Rank 0 sends through the wrapper; its port still reads the socket underneath.
    const ports = [new PortOver(server, lowWater), client];
    const a = new WebTransport(0, 2, [link(1, ports[0] as ChannelPort)], { ioTimeoutMs: 10_000 });
    const b = new WebTransport(1, 2, [link(0, ports[1] as ChannelPort)], { ioTimeoutMs: 10_000 });
    try {
      sockets[1].pause();
      const length = 8 * 1024 * 1024;
      const data = bigPattern(length, 2);
      const into = new Uint8Array(length);
      const sent = a.send(1, 3, data);
      await sleep(50);
      assert.ok(lowWater.threshold > 0, 'the sender set a threshold');
      assert.ok(sockets[0].bufferedAmount <= kHighWater + kChunk);
      sockets[1].resume();
      await Promise.all([sent, b.recv(0, 3, into)]);
      assert.ok(equalBytes(into, data));
      assert.ok(lowWater.events > 0, `${lowWater.events} low-water events`);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});

/**
 * A ws WebSocket that also has RTCDataChannel's low-water event: 'bufferedamountlow' fires when
 * a write completes with bufferedAmount at or below the threshold, having been above it.
 */
class LowWaterSocket implements LowWaterEvent {
  bufferedAmountLowThreshold = 0;
  events = 0;
  private readonly listeners: Array<(event: unknown) => void> = [];
  private above = false;

  constructor(readonly socket: WebSocket) {}

  get threshold(): number {
    return this.bufferedAmountLowThreshold;
  }

  send(data: Uint8Array): void {
    this.socket.send(data, () => {
      if (this.above && this.socket.bufferedAmount <= this.bufferedAmountLowThreshold) {
        this.above = false;
        this.events++;
        for (const listener of this.listeners) listener({});
      }
    });
    if (this.socket.bufferedAmount > this.bufferedAmountLowThreshold) this.above = true;
  }

  addEventListener(type: 'bufferedamountlow', listener: (event: unknown) => void): void {
    if (type === 'bufferedamountlow') this.listeners.push(listener);
  }
}

/** A port whose channel sends through `sender` (and is otherwise the port's own channel). */
class PortOver {
  readonly channel: ChannelLike;

  constructor(
    private readonly port: ChannelPort,
    sender: LowWaterSocket,
  ) {
    const socket = port.channel;
    this.channel = {
      get binaryType() {
        return socket.binaryType;
      },
      set binaryType(value) {
        socket.binaryType = value;
      },
      get readyState() {
        return socket.readyState;
      },
      get bufferedAmount() {
        return socket.bufferedAmount;
      },
      get bufferedAmountLowThreshold() {
        return sender.bufferedAmountLowThreshold;
      },
      set bufferedAmountLowThreshold(value: number) {
        sender.bufferedAmountLowThreshold = value;
      },
      send: (data: Uint8Array) => sender.send(data),
      close: () => socket.close(),
      addEventListener: (type: string, listener: (event: never) => void) => {
        if (type === 'bufferedamountlow') sender.addEventListener(type, listener as (event: unknown) => void);
        else socket.addEventListener(type as 'open', listener as (event: unknown) => void);
      },
    } as ChannelLike;
  }

  get closed(): boolean {
    return this.port.closed;
  }

  attach(sink: Parameters<ChannelPort['attach']>[0]): void {
    this.port.attach(sink);
  }

  whenClosed(ms: number): Promise<void> {
    return this.port.whenClosed(ms);
  }
}
