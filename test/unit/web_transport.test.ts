/**
 * The web transport's frames (src/transport/web/framing.ts), and its chunking and reassembly over a
 * real loopback WebSocket (sender.ts, receiver.ts): sizes around the inline limit and the chunk
 * size, receives posted before, during and after a message arrives, views of shared memory sent
 * as they are or through the staging copy, and a peer that sends what is not a frame.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PeerFailureError, ProtocolError } from '../../src/core/errors.js';
import {
  decodeHeader,
  decodeNotice,
  encodeHeader,
  encodeNotice,
  inlineFrame,
  kHeaderBytes,
  kInlineMaxBytes,
  kKindControl,
  kKindData,
  kKindLink,
  kLinkBye,
  kLinkNotice,
  kMaxLinkBytes,
} from '../../src/transport/web/framing.js';
import { bigPattern, equalBytes, pattern } from './tcp_test_helpers.js';
import { transportPair } from './web_test_helpers.js';

const kLimits = { maxFrameBytes: 1 << 20, maxControlBytes: 1 << 16 };

describe('web frames', () => {
  it('a header round-trips; inline frames carry their payload', () => {
    const header = new Uint8Array(kHeaderBytes);
    encodeHeader(kKindData, 0xffff_ffff, 1234, header);
    assert.deepEqual(decodeHeader(header, kLimits), { kind: kKindData, tag: 0xffff_ffff, length: 1234 });
    const frame = inlineFrame(kKindControl, 0, Uint8Array.of(1, 2, 3));
    assert.equal(frame.byteLength, kHeaderBytes + 3);
    assert.deepEqual(decodeHeader(frame, kLimits), { kind: kKindControl, tag: 0, length: 3 });
    assert.deepEqual([...frame.subarray(kHeaderBytes)], [1, 2, 3]);
  });

  it('refuses what a peer must not send: version, kind, flags, lengths past the limits, bad link frames', () => {
    const bad = (mutate: (bytes: Uint8Array, view: DataView) => void, expected: RegExp) => {
      const bytes = new Uint8Array(kHeaderBytes);
      encodeHeader(kKindData, 1, 10, bytes);
      mutate(bytes, new DataView(bytes.buffer));
      assert.throws(
        () => decodeHeader(bytes, kLimits),
        (e: unknown) => e instanceof ProtocolError && expected.test(e.message),
      );
    };
    bad((_, v) => v.setUint8(0, 9), /frame version 9/);
    bad((_, v) => v.setUint8(1, 7), /unknown frame kind 7/);
    bad((_, v) => v.setUint16(2, 1, true), /flags/);
    bad((_, v) => v.setUint32(8, (1 << 20) + 1, true), /exceeds the limit/);
    bad((_, v) => {
      v.setUint8(1, kKindControl);
      v.setUint32(4, 5, true);
    }, /non-zero tag/);
    bad((_, v) => {
      v.setUint8(1, kKindLink);
      v.setUint32(4, kLinkBye, true);
    }, /bad link frame/);
    assert.throws(() => decodeHeader(new Uint8Array(5), kLimits), /shorter than a header/);
    // A link frame is always inline.
    const chunked = new Uint8Array(kHeaderBytes);
    encodeHeader(kKindLink, kLinkNotice, 8, chunked);
    assert.throws(() => decodeHeader(chunked, kLimits), /not sent inline/);
  });

  it('a notice names a rank and carries a reason cut to fit on a character boundary', () => {
    assert.deepEqual(decodeNotice(encodeNotice(2, 'gone'), 3), { rank: 2, reason: 'gone' });
    const long = encodeNotice(1, 'é'.repeat(2000));
    assert.ok(long.byteLength <= kMaxLinkBytes);
    assert.match(decodeNotice(long, 2).reason, /^é+$/);
    assert.throws(() => decodeNotice(encodeNotice(5, 'x'), 3), /outside a job of size 3/);
  });
});

describe('web transport: chunking and reassembly over a WebSocket', () => {
  const chunk = 64 * 1024;
  const sizes = [0, 1, kInlineMaxBytes, kInlineMaxBytes + 1, chunk - 1, chunk, chunk + 1, 3 * chunk + 5, 1 << 20];

  for (const when of ['recv first', 'send first'] as const) {
    it(`every size around the inline limit and the chunk size arrives whole (${when})`, async () => {
      const pair = await transportPair({ chunkBytes: chunk });
      const [a, b] = pair.transports;
      try {
        const intos = sizes.map((n) => new Uint8Array(n));
        const recvAll = () => intos.map((into, i) => b.recv(0, 10 + i, into));
        const sendAll = () => sizes.map((n, i) => a.send(1, 10 + i, pattern(n, i)));
        if (when === 'recv first') {
          const recvs = recvAll();
          await Promise.all([...sendAll(), ...recvs]);
        } else {
          await Promise.all(sendAll());
          await a.send(1, 1, new Uint8Array(0)); // a fence behind them: every message is in
          await b.recv(0, 1, new Uint8Array(0));
          await Promise.all(recvAll());
        }
        for (const [i, n] of sizes.entries())
          assert.ok(equalBytes(intos[i] as Uint8Array, pattern(n, i)), `message of ${n} bytes`);
        const stats = b.stats();
        const chunked = sizes.filter((n) => n > 0).reduce((sum, n) => sum + n, 0);
        if (when === 'recv first') assert.equal(stats.directBytes, chunked, 'straight into the receives');
        else assert.equal(stats.stagedBytes, chunked, 'staged, then copied');
      } finally {
        await pair.close();
      }
    });
  }

  it('a receive posted while its message is arriving takes the chunks so far and the rest directly', async () => {
    const pair = await transportPair({ chunkBytes: chunk, highWaterBytes: 2 * chunk });
    const [a, b] = pair.transports;
    try {
      const length = 40 * chunk;
      const data = bigPattern(length, 3);
      const sent = a.send(1, 5, data);
      // A small message behind the large one on another tag tells nothing; wait for some bytes instead.
      const until = performance.now() + 5000;
      while (b.stats().stagedBytes === 0 && performance.now() < until) await new Promise((r) => setTimeout(r, 1));
      const into = new Uint8Array(length);
      await Promise.all([sent, b.recv(0, 5, into)]);
      assert.ok(equalBytes(into, data));
      const { stagedBytes, directBytes } = b.stats();
      assert.ok(stagedBytes > 0 && directBytes > 0, `staged ${stagedBytes}, then direct ${directBytes}`);
      assert.equal(stagedBytes + directBytes, length);
    } finally {
      await pair.close();
    }
  });

  for (const sendsSharedViews of [true, false]) {
    it(`views of shared memory arrive whole ${sendsSharedViews ? 'as they are (ws)' : 'through the staging copy (browsers)'}`, async () => {
      const traits = { sendsSharedViews, retainsSentBytes: sendsSharedViews, sendCallback: false };
      const pair = await transportPair({ chunkBytes: chunk, traits });
      const [a, b] = pair.transports;
      try {
        const shared = bigPattern(5 * chunk + 12, 9, true);
        const view = shared.subarray(4, shared.byteLength - 4);
        const into = new Uint8Array(new SharedArrayBuffer(view.byteLength));
        const sent = a.send(1, 3, view);
        await Promise.all([sent, b.recv(0, 3, into)]);
        assert.ok(equalBytes(into, view));
        // Resolved: the sender may change its buffer; what is in flight is not affected.
        const again = a.send(1, 4, view);
        await again;
        view.fill(0);
        const second = new Uint8Array(view.byteLength);
        await b.recv(0, 4, second);
        assert.ok(equalBytes(second, bigPattern(5 * chunk + 12, 9).subarray(4, shared.byteLength - 4)));
      } finally {
        await pair.close();
      }
    });
  }

  it('control messages of every size come in order, behind the data sent before them', async () => {
    const pair = await transportPair({ chunkBytes: chunk });
    const [a, b] = pair.transports;
    try {
      const got: Uint8Array[] = [];
      const sizesOfControl = [0, 5, kInlineMaxBytes + 1, 3 * chunk];
      const all = new Promise<void>((resolve) =>
        b.onControl((_, payload) => {
          got.push(payload.slice());
          if (got.length === sizesOfControl.length) resolve();
        }),
      );
      const data = a.send(1, 7, bigPattern(2 * chunk, 1));
      await Promise.all([...sizesOfControl.map((n, i) => a.sendControl(1, pattern(n, 100 + i))), data]);
      await all;
      for (const [i, n] of sizesOfControl.entries()) {
        assert.ok(equalBytes(got[i] as Uint8Array, pattern(n, 100 + i)), `control ${i}`);
      }
      // The data message was staged before the control messages were delivered.
      assert.equal(b.stats().stagedBytes, 2 * chunk);
      await b.recv(0, 7, new Uint8Array(2 * chunk));
    } finally {
      await pair.close();
    }
  });

  const garbage: Array<[string, (socket: { send(data: unknown): void }) => void, RegExp]> = [
    ['a text message', (s) => s.send('hello'), /text message/],
    ['a frame of another version', (s) => s.send(Uint8Array.of(9, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)), /frame version 9/],
    [
      'an inline frame of the wrong length',
      (s) => s.send(inlineFrame(kKindData, 1, new Uint8Array(4)).subarray(0, 14)),
      /frame of 14 bytes for a payload of 4/,
    ],
    [
      'a chunk longer than what remains',
      (s) => {
        const header = new Uint8Array(kHeaderBytes);
        encodeHeader(kKindData, 1, 100 * 1024, header);
        s.send(header);
        s.send(new Uint8Array(100 * 1024 + 1));
      },
      /chunk of 102401 bytes where 102400 of a 102400-byte message remain/,
    ],
  ];
  for (const [what, send, pattern] of garbage) {
    it(`${what} fails the link with a PeerFailureError naming the peer and the violation`, async () => {
      const pair = await transportPair();
      const [, b] = pair.transports;
      try {
        const pending = b.recv(0, 1, new Uint8Array(100 * 1024));
        send(pair.sockets[0]);
        await assert.rejects(
          pending,
          (e: unknown) =>
            e instanceof PeerFailureError && e.peerRank === 0 && /rank 0/.test(e.message) && pattern.test(e.message),
        );
      } finally {
        await pair.close();
      }
    });
  }
});
