/**
 * A stranger that knows the job id and claims rank 1 of 2, but proves the secret 'guessed':
 * runs the dialer's side of the handshake on `socket` and resolves with every byte the
 * acceptor sent (the challenge, then its ack) once it closes the connection.
 */
import type net from 'node:net';
import { JobKey } from '../../src/rendezvous/auth.js';
import { checkChallenge, dialerProof, encodeHello, encodeResponse, kChallengeBytes } from '../../src/rendezvous/handshake.js';

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
