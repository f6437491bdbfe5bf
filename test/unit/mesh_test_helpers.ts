/**
 * Helpers of the mesh tests over TCP (mesh.test.ts) and Unix sockets (mesh_local_sockets.test.ts).
 */
import type net from 'node:net';
import { after, before } from 'node:test';
import { JobKey } from '../../src/rendezvous/auth.js';
import { checkChallenge, dialerProof, encodeHello, encodeResponse, kChallengeBytes } from '../../src/rendezvous/handshake.js';
import type { StoreAddress } from '../../src/rendezvous/store.js';
import { TcpStoreClient, TcpStoreServer } from '../../src/rendezvous/tcp_store.js';

/**
 * Rank 0's store for the enclosing describe block: started before its tests, closed after them
 * together with every client `client()` handed out.
 */
export function storeFixture(): { readonly address: StoreAddress; client(): Promise<TcpStoreClient> } {
  let server: TcpStoreServer | undefined;
  let address: StoreAddress | undefined;
  const clients: TcpStoreClient[] = [];
  before(async () => {
    server = new TcpStoreServer({ host: '127.0.0.1', port: 0 });
    address = await server.listen();
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await server?.close();
  });
  return {
    get address() {
      return address as StoreAddress;
    },
    async client() {
      const client = await TcpStoreClient.connect({ ...(address as StoreAddress), connectTimeoutMs: 2000 });
      clients.push(client);
      return client;
    },
  };
}

/**
 * A stranger that knows the job id and claims rank 1 of 2, but proves the secret 'guessed':
 * runs the dialer's side of the handshake on `socket` and resolves with every byte the
 * acceptor sent (the challenge, then its ack) once it closes the connection.
 */
export function strangerWithWrongSecret(socket: net.Socket, jobId: string, nonceByte: number): Promise<Buffer> {
  return new Promise<Buffer>((resolve) => {
    let got = Buffer.alloc(0);
    const nonce = Buffer.alloc(32, nonceByte);
    socket.on('error', () => {});
    socket.on('data', (chunk) => {
      got = Buffer.concat([got, chunk]);
      if (got.byteLength === kChallengeBytes) {
        const challenge = checkChallenge(got, 0, 2, 'rank 0');
        const transcript = { jobId, size: 2, dialer: 1, acceptor: 0, dialerNonce: nonce, acceptorNonce: challenge.nonce };
        socket.write(encodeResponse(1, 2, dialerProof(new JobKey('guessed'), transcript)));
      }
    });
    socket.on('close', () => resolve(got));
    socket.write(encodeHello(1, 2, jobId, nonce));
  });
}
