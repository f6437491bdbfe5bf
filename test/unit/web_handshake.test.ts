/**
 * The handshake of a web link (src/transport/web/handshake.ts, link_auth.ts) over a real loopback
 * WebSocket: both ends prove the job secret with WebCrypto, and every refusal says why: a wrong
 * secret, another job or size, a rank out of range, one that should not dial, one already linked,
 * a peer answering as another rank; a stranger is closed without an answer.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ProtocolError } from '../../src/core/errors.js';
import { JobKey } from '../../src/rendezvous/auth.js';
import type { ChannelPort } from '../../src/rendezvous/channel.js';
import {
  type Admission,
  acceptLink,
  dialLink,
  kAckBadRank,
  kAckOk,
  kAckUnexpectedRank,
  kWebLinkMagic,
  kWebLinkVersion,
  type LinkIdentity,
  Refused,
} from '../../src/transport/web/handshake.js';
import { newNonce, WebJobKey } from '../../src/transport/web/link_auth.js';
import { wsPair } from './web_test_helpers.js';

const soon = () => performance.now() + 3000;

async function identity(rank: number, options: { size?: number; jobId?: string; secret?: string } = {}): Promise<LinkIdentity> {
  return {
    rank,
    size: options.size ?? 3,
    jobId: options.jobId ?? 'job',
    key: await WebJobKey.create(options.secret ?? 'secret'),
  };
}

/** Admits every rank once, as a listener expecting every other rank would. */
function everyone(): Admission & { claimed: Set<number> } {
  const claimed = new Set<number>();
  return {
    claimed,
    expects: async () => kAckOk,
    claim: (rank) => !claimed.has(rank) && Boolean(claimed.add(rank)),
  };
}

/** Runs both sides on a fresh pair: the acceptor (rank of `acceptor`) listens, the dialer dials `expected`. */
async function handshake(
  dialer: LinkIdentity,
  acceptor: LinkIdentity,
  options: { expected?: number; admission?: Admission } = {},
): Promise<{ dialed: PromiseSettledResult<void>; accepted: PromiseSettledResult<number> }> {
  const { server, client } = await wsPair();
  try {
    const accepting = acceptLink(server, acceptor, options.admission ?? everyone(), 'the dialer', soon());
    const dialing = dialLink(client, dialer, options.expected ?? acceptor.rank, 'the acceptor', soon());
    // A dialer that gives up closes its channel (the mesh does), so the acceptor stops waiting.
    dialing.catch(() => client.channel.close());
    const [dialed, accepted] = await Promise.allSettled([dialing, accepting]);
    return { dialed, accepted };
  } finally {
    server.channel.close();
    client.channel.close();
  }
}

function rejectedWith(
  result: PromiseSettledResult<unknown>,
  kind: new (...args: never[]) => Error,
  pattern: RegExp,
  what = '',
): void {
  assert.equal(result.status, 'rejected', `${what} refused`);
  const reason = (result as PromiseRejectedResult).reason as Error;
  assert.ok(reason instanceof kind, `${what} ${reason.name}: ${reason.message}`);
  assert.match(reason.message, pattern, what);
}

describe('web link handshake', () => {
  it("WebCrypto's proofs are those of the TCP backend's key, with a secret and without one", async () => {
    const parts = [Uint8Array.of(1, 2, 3), new Uint8Array(0), newNonce()];
    for (const secret of ['s3cret', undefined]) {
      const web = await WebJobKey.create(secret);
      const node = new JobKey(secret);
      const mac = await web.mac('label', ...parts);
      assert.deepEqual(Buffer.from(mac), node.mac('label', ...parts), `secret ${secret}`);
      assert.equal(await web.verify(mac, 'label', ...parts), true);
      assert.equal(await web.verify(mac, 'other label', ...parts), false);
      assert.equal(web.authenticated, secret !== undefined);
    }
  });

  it('the same job and secret: the acceptor learns the dialer rank, the dialer that it reached the rank it wanted', async () => {
    const admission = everyone();
    const { dialed, accepted } = await handshake(await identity(2), await identity(0), { admission });
    assert.equal(dialed.status, 'fulfilled');
    assert.deepEqual(accepted, { status: 'fulfilled', value: 2 });
    assert.deepEqual([...admission.claimed], [2]);
  });

  it('a wrong secret: the dialer finds out first (the acceptor proves itself first) and says so', async () => {
    const { dialed, accepted } = await handshake(await identity(2, { secret: 'other' }), await identity(0));
    rejectedWith(dialed, ProtocolError, /the acceptor could not prove it knows the job secret.*RINGREDUCE_SECRET differs/);
    rejectedWith(accepted, Refused, /rank 2 sent no response/);
  });

  it('a wrong job, size or rank is refused with the reason, on both sides', async () => {
    const cases: Array<[string, LinkIdentity, LinkIdentity, RegExp, RegExp]> = [
      [
        'job',
        await identity(2, { jobId: 'other' }),
        await identity(0),
        /refused the connection: different job id/,
        /job "other"/,
      ],
      ['size', await identity(2, { size: 4 }), await identity(0), /different world size/, /world size 4/],
      ['rank out of range', await identity(7, { size: 3 }), await identity(0), /rank out of range/, /rank 7: rank out of range/],
      ['our own rank', await identity(0), await identity(0), /rank out of range/, /rank 0: rank out of range/],
    ];
    for (const [what, dialer, acceptor, dialerSays, acceptorSays] of cases) {
      const { dialed, accepted } = await handshake(dialer, acceptor, { expected: 0 });
      rejectedWith(dialed, ProtocolError, dialerSays, `${what}, the dialer:`);
      rejectedWith(accepted, Refused, acceptorSays, `${what}, the acceptor:`);
    }
  });

  it('a rank that should not dial this one, or one already linked, is refused; a peer answering as another rank too', async () => {
    const unexpected: Admission = { expects: async (rank) => (rank === 1 ? kAckUnexpectedRank : kAckBadRank), claim: () => true };
    const first = await handshake(await identity(1), await identity(2), { admission: unexpected });
    rejectedWith(first.dialed, ProtocolError, /that rank does not dial this one/);
    rejectedWith(first.accepted, Refused, /rank 1: that rank does not dial this one/);

    const taken: Admission = { expects: async () => kAckOk, claim: () => false };
    const second = await handshake(await identity(1), await identity(0), { admission: taken });
    rejectedWith(second.dialed, ProtocolError, /another connection already claimed this rank/);
    rejectedWith(second.accepted, Refused, /rank 1: another connection already claimed this rank/);

    const wrongPeer = await handshake(await identity(1), await identity(0), { expected: 2 });
    rejectedWith(wrongPeer.dialed, ProtocolError, /the acceptor answered as rank 0 of 3, expected rank 2 of 3/);
  });

  it('a stranger is closed without an answer: garbage first, or nothing at all', async () => {
    for (const garbage of [true, false]) {
      const { server, client } = await wsPair();
      const heard: unknown[] = [];
      client.attach({ message: (bytes) => heard.push(bytes), closed: () => heard.push('closed') });
      if (garbage) client.channel.send(new TextEncoder().encode('GET / HTTP/1.1\r\n\r\n'));
      const deadline = performance.now() + (garbage ? 3000 : 200);
      await assert.rejects(
        acceptLink(server, await identity(0), everyone(), 'a stranger', deadline),
        (e: unknown) => e instanceof Refused && (garbage ? /no hello/.test(e.reason) : /no hello: .*in time/.test(e.reason)),
      );
      await waitFor(() => heard.includes('closed'));
      assert.deepEqual(heard, ['closed'], 'no answer, only the close');
    }
  });

  it('a proof that fails is answered with the reason and the connection closed', async () => {
    // A peer that speaks the protocol but knows no secret: a hello, then a response with a made-up proof.
    const { server, client } = await wsPair();
    const answers: Uint8Array[] = [];
    const accepting = acceptLink(server, await identity(0), everyone(), 'an impostor', soon());
    accepting.catch(() => {});
    const port = client as ChannelPort;
    const hello = fixed(48 + 3, 1, 3, 1, 3);
    hello.set(newNonce(), 16);
    hello.set(new TextEncoder().encode('job'), 48);
    port.channel.send(hello);
    answers.push(
      (await port.next(
        soon(),
        () => new Error('no challenge'),
        (c) => new Error(c),
      )) as Uint8Array,
    );
    port.channel.send(fixed(48, 3, 0, 1, 3)); // the response, its proof all zeros
    answers.push(
      (await port.next(
        soon(),
        () => new Error('no ack'),
        (c) => new Error(c),
      )) as Uint8Array,
    );
    await assert.rejects(accepting, (e: unknown) => e instanceof Refused && /rank 1: authentication failed/.test(e.reason));
    const ack = new DataView((answers[1] as Uint8Array).buffer, (answers[1] as Uint8Array).byteOffset);
    assert.equal(ack.getUint8(6), 4, 'an ack');
    assert.equal(ack.getUint8(7), 6, 'status: bad authentication');
    client.channel.close();
  });
});

/** The 16 fixed bytes of a handshake message, in a buffer of `length`. */
function fixed(length: number, kind: number, byte7: number, rank: number, size: number): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(length);
  const view = new DataView(out.buffer);
  view.setUint32(0, kWebLinkMagic, true);
  view.setUint16(4, kWebLinkVersion, true);
  view.setUint8(6, kind);
  view.setUint8(7, byte7);
  view.setUint32(8, rank, true);
  view.setUint32(12, size, true);
  return out;
}

async function waitFor(condition: () => boolean): Promise<void> {
  const until = performance.now() + 3000;
  while (!condition()) {
    if (performance.now() > until) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
