import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ProtocolError } from '../../src/core/errors.js';
import {
  decodeHeader,
  encodeHeader,
  kFrameMagic,
  kHeaderBytes,
  kKindControl,
  kKindData,
  kMaxU32,
  readU32,
  writeU32,
} from '../../src/transport/tcp/framing.js';

const limits = { maxFrameBytes: 1 << 20, maxControlBytes: 4096 };

function header(kind: number, tag: number, length: number): Uint8Array {
  const out = new Uint8Array(kHeaderBytes);
  encodeHeader(kind as typeof kKindData, tag, length, out);
  return out;
}

describe('frame header', () => {
  it('round-trips data and control headers, including the u32 extremes', () => {
    for (const [kind, tag, length] of [
      [kKindData, 0, 0],
      [kKindData, kMaxU32, limits.maxFrameBytes],
      [kKindData, 0x8000_0001, 12345],
      [kKindControl, 0, 4096],
      [kKindControl, 0, 0],
    ] as const) {
      assert.deepEqual(decodeHeader(header(kind, tag, length), 0, limits), { kind, tag, length });
    }
  });

  it('encodes the documented little-endian layout at an offset', () => {
    const out = new Uint8Array(20).fill(0xee);
    encodeHeader(kKindData, 0x0403_0201, 0x0807_0605, out, 4);
    assert.deepEqual([...out.subarray(4, 16)], [kFrameMagic, kKindData, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
    assert.equal(out[3], 0xee);
    assert.equal(out[16], 0xee);
    const wide = { maxFrameBytes: kMaxU32, maxControlBytes: 0 };
    assert.deepEqual(decodeHeader(out, 4, wide), { kind: kKindData, tag: 0x0403_0201, length: 0x0807_0605 });
  });

  it('refuses bad magic, unknown kind, flags, tagged control frames and truncation', () => {
    const cases: [string, (h: Uint8Array) => void, RegExp][] = [
      ['magic', (h) => (h[0] = 0x00), /bad frame magic 0x00/],
      ['kind', (h) => (h[1] = 7), /unknown frame kind 7/],
      ['flags', (h) => (h[3] = 1), /unknown frame flags/],
    ];
    for (const [, mutate, message] of cases) {
      const h = header(kKindData, 1, 10);
      mutate(h);
      assert.throws(
        () => decodeHeader(h, 0, limits),
        (e) => e instanceof ProtocolError && message.test(e.message),
      );
    }
    assert.throws(() => decodeHeader(header(kKindControl, 5, 10), 0, limits), /control frame with non-zero tag 5/);
    assert.throws(() => decodeHeader(header(kKindData, 1, 10).subarray(0, 11), 0, limits), /truncated frame header: 11 of 12/);
  });

  it('refuses lengths over the limit of their kind', () => {
    assert.throws(
      () => decodeHeader(header(kKindData, 9, limits.maxFrameBytes + 1), 0, limits),
      (e) => e instanceof ProtocolError && /data frame of 1048577 bytes \(tag 9\) exceeds the limit of 1048576/.test(e.message),
    );
    assert.throws(
      () => decodeHeader(header(kKindControl, 0, 4097), 0, limits),
      /control frame of 4097 bytes exceeds the limit of 4096/,
    );
    assert.throws(() => decodeHeader(header(kKindData, 0, kMaxU32), 0, limits), ProtocolError);
  });

  it('reads and writes u32 values above 2^31 without sign trouble', () => {
    const bytes = new Uint8Array(4);
    for (const value of [0, 1, 0x7fff_ffff, 0x8000_0000, kMaxU32]) {
      writeU32(bytes, 0, value);
      assert.equal(readU32(bytes, 0), value);
    }
  });
});
