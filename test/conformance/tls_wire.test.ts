/**
 * What travels on the wire with and without TLS (RINGREDUCE_TLS): a proxy on every link
 * (test/helpers/fault_proxy.ts) records the bytes forwarded while 2 real engines allreduce a
 * tensor with a distinctive byte pattern. Plain links carry the pattern's bytes; TLS links carry
 * none of its 64-byte windows.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { startProxiedWorld } from '../helpers/proxied_world.js';

const kLength = 16 * 1024; // floats: 64 KiB per rank
const kWindow = 64;

/** Rank r's input: distinct finite floats whose bytes no header or framing contains. */
function input(rank: number): Float32Array {
  const out = new Float32Array(kLength);
  for (let i = 0; i < kLength; i++) out[i] = ((i * 2654435761 + rank * 40503) % 1_000_003) / 7 + 0.5;
  return out;
}

/** How many of the input's 64-byte windows (one per KiB) appear in `wire`. */
function windowsFound(wire: Buffer, data: Float32Array): number {
  const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  let found = 0;
  for (let at = 0; at + kWindow <= bytes.byteLength; at += 1024) if (wire.includes(bytes.subarray(at, at + kWindow))) found++;
  return found;
}

async function recordAllreduce(tls: boolean): Promise<{ wire: Buffer; inputs: Float32Array[] }> {
  const world = await startProxiedWorld(2, { secret: 'wire-secret', tls });
  try {
    for (const proxy of world.links()) proxy.record();
    const inputs = [input(0), input(1)];
    const results = await Promise.all(world.ranks.map((rr, rank) => rr.allreduce(inputs[rank] as Float32Array, { name: 'w' })));
    for (const result of results) {
      for (let i = 0; i < kLength; i += 997) assert.equal(result[i], Math.fround((inputs[0]?.[i] ?? 0) + (inputs[1]?.[i] ?? 0)));
    }
    return { wire: Buffer.concat(world.links().map((proxy) => proxy.recorded())), inputs };
  } finally {
    await world.close();
  }
}

describe('TLS on the wire', () => {
  it("plain links carry the tensor's bytes; TLS links carry none of them", async () => {
    const plain = await recordAllreduce(false);
    const windows = kLength / 256;
    assert.ok(plain.wire.byteLength >= kLength * 4, `recorded ${plain.wire.byteLength} bytes`);
    assert.ok(
      windowsFound(plain.wire, plain.inputs[0] as Float32Array) + windowsFound(plain.wire, plain.inputs[1] as Float32Array) >
        windows / 2,
      'the plain capture should show the inputs',
    );
    const secure = await recordAllreduce(true);
    assert.ok(secure.wire.byteLength >= kLength * 4, `recorded ${secure.wire.byteLength} bytes`);
    for (const data of secure.inputs) assert.equal(windowsFound(secure.wire, data), 0);
  });
});
