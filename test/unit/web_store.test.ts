/**
 * The store over WebSocket (src/rendezvous/web_store_client.ts, web_store_bridge.ts): a browser
 * rank's client, through the bridge, to a TcpStoreClient of a real TcpStoreServer, as ringrun
 * hosts it for a web job. One key space with the Node ranks; deadlines naming the key; close;
 * and a malformed or oversized request closing only its own connection.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { WebSocket, WebSocketServer } from 'ws';
import { RingReduceError, ShutdownError, TimeoutError } from '../../src/core/errors.js';
import { JobKey } from '../../src/rendezvous/auth.js';
import { TcpStoreClient, TcpStoreServer } from '../../src/rendezvous/tcp_store.js';
import { WebStoreBridge } from '../../src/rendezvous/web_store_bridge.js';
import { WebStoreClient } from '../../src/rendezvous/web_store_client.js';
import { decodeReply, decodeText, kWebOpError } from '../../src/rendezvous/web_store_protocol.js';

const kSecret = 'store secret';

describe('the store over WebSocket', () => {
  let server: TcpStoreServer;
  let store: TcpStoreClient;
  let wss: WebSocketServer;
  let url: string;
  const bridges: WebStoreBridge[] = [];
  const violations: string[] = [];

  before(async () => {
    server = new TcpStoreServer({ host: '127.0.0.1', port: 0, key: new JobKey(kSecret) });
    const address = await server.listen();
    store = await TcpStoreClient.connect({ ...address, connectTimeoutMs: 5000, key: new JobKey(kSecret) });
    wss = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false });
    await new Promise<void>((resolve) => wss.once('listening', () => resolve()));
    url = `ws://127.0.0.1:${(wss.address() as { port: number }).port}/store?token=t0ps3cret`;
    wss.on('connection', (socket, request) => {
      bridges.push(
        new WebStoreBridge(socket, store, `${request.socket.remoteAddress}:${request.socket.remotePort}`, {
          maxPending: 8,
          maxMessageBytes: 64 * 1024,
          onProtocolError: (error) => violations.push(error.message),
        }),
      );
    });
  });

  after(async () => {
    for (const bridge of bridges) bridge.close();
    await new Promise<void>((resolve) => wss.close(() => resolve()));
    await store.close();
    await server.close();
  });

  const connect = () => WebStoreClient.connect(new WebSocket(url, { perMessageDeflate: false }), 'the bridge', 5000);

  it('set, get and add, in the key space the Node ranks use; a get waits for a later set', async () => {
    const client = await connect();
    try {
      await client.set('a', Uint8Array.of(1, 2, 3));
      assert.deepEqual([...(await client.get('a', 1000))], [1, 2, 3]);
      assert.deepEqual([...(await store.get('a', 0))], [1, 2, 3], 'a Node rank sees it');
      await client.set('empty', new Uint8Array(0));
      assert.equal((await client.get('empty', 0)).byteLength, 0);
      const waiting = client.get('later', 3000);
      await store.set('later', Uint8Array.of(9));
      assert.deepEqual([...(await waiting)], [9]);
      assert.equal(await client.add('count', 5), 5);
      assert.equal(await store.add('count', -2), 3);
      assert.equal(await client.add('count', 1), 4);
      const big = new Uint8Array(60 * 1024).fill(7);
      await client.set('big', big);
      assert.deepEqual(await client.get('big', 0), big);
    } finally {
      await client.close();
    }
  });

  it('a get past its deadline is a TimeoutError naming the key; the connection goes on', async () => {
    const client = await connect();
    try {
      const started = performance.now();
      await assert.rejects(
        client.get('never', 150),
        (e: unknown) => e instanceof TimeoutError && /store key "never" was not set within 150 ms/.test(e.message),
      );
      assert.ok(performance.now() - started >= 140);
      assert.equal(await client.add('after-timeout', 1), 1);
    } finally {
      await client.close();
    }
  });

  it('close rejects what is pending with ShutdownError, and everything after', async () => {
    const client = await connect();
    const pending = client.get('not-yet', 5000);
    await client.close();
    await assert.rejects(pending, ShutdownError);
    await assert.rejects(client.set('x', new Uint8Array(1)), ShutdownError);
    await client.close(); // idempotent
  });

  it('the bridge going away fails what is pending, naming the store', async () => {
    const client = await connect();
    const pending = client.get('not-yet-either', 5000);
    await new Promise((resolve) => setTimeout(resolve, 20));
    bridges.at(-1)?.close();
    await assert.rejects(
      pending,
      (e: unknown) => e instanceof RingReduceError && /store connection to the bridge .*closed/.test(e.message),
    );
  });

  it('a malformed, oversized or excessive request closes that connection only, with the reason', async () => {
    const attempts: Array<[string, (socket: WebSocket) => void, RegExp]> = [
      ['text', (s) => s.send('set a 1'), /a text message/],
      ['garbage', (s) => s.send(Uint8Array.of(1, 2, 3)), /store request of 3 bytes/],
      ['oversized', (s) => s.send(new Uint8Array(64 * 1024 + 1)), /exceeds the limit of 65536/],
      ['unknown op', (s) => s.send(request(9, 1, 'k')), /unknown store op 9/],
      [
        'too many',
        (s) => {
          for (let id = 1; id <= 9; id++) s.send(request(2, id, `wait-${id}`, 5000));
        },
        /more than 8 requests open/,
      ],
    ];
    const bystander = await connect();
    try {
      for (const [what, send, reason] of attempts) {
        const socket = new WebSocket(url, { perMessageDeflate: false });
        await new Promise((resolve) => socket.once('open', resolve));
        const replies: Buffer[] = [];
        socket.on('message', (data: Buffer) => replies.push(data));
        const closed = new Promise((resolve) => socket.once('close', resolve));
        send(socket);
        await closed;
        const last = decodeReply(replies.at(-1) as Buffer);
        assert.deepEqual([last.op, last.id], [kWebOpError, 0], `${what}: an error about the connection`);
        assert.match(decodeText(last.body), reason, what);
        assert.match(violations.at(-1) as string, reason, `${what}: reported`);
      }
      await bystander.set('still', Uint8Array.of(1));
      assert.deepEqual([...(await bystander.get('still', 0))], [1], 'another connection is unaffected');
    } finally {
      await bystander.close();
    }
  });
});

/** A request's bytes (web_store_protocol.ts), without the client's checks. */
function request(op: number, id: number, key: string, arg = 0): Uint8Array {
  const keyBytes = new TextEncoder().encode(key);
  const out = new Uint8Array(16 + keyBytes.byteLength);
  const view = new DataView(out.buffer);
  view.setUint8(0, 1);
  view.setUint8(1, op);
  view.setUint16(2, keyBytes.byteLength, true);
  view.setUint32(4, id, true);
  view.setFloat64(8, arg, true);
  out.set(keyBytes, 16);
  return out;
}
