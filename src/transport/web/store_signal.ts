/**
 * The signalling of a data channel between two browser ranks (openers.ts, Signal), carried by the
 * job's store: the n-th message of a kind from rank a to rank b is the key
 * `<prefix>signal/<a>-<b>/<kind>/<n>`. Store keys are written once and read by a get that waits,
 * so messages of a kind arrive in order and nobody polls. One receive of a kind at a time.
 */
import { InvalidArgumentError } from '../../core/errors.js';
import type { Store } from '../../rendezvous/store.js';
import type { Signal } from './openers.js';

const kUtf8Encoder = new TextEncoder();
const kUtf8 = new TextDecoder();
/** Kinds become part of a key: short words only. */
const kKindPattern = /^[A-Za-z0-9_-]{1,32}$/;

export function storeSignal(store: Store, prefix: string, rank: number, peer: number): Signal {
  const sent = new Map<string, number>();
  const received = new Map<string, number>();
  const key = (from: number, to: number, kind: string, n: number) => `${prefix}signal/${from}-${to}/${kind}/${n}`;
  const check = (kind: string) => {
    if (!kKindPattern.test(kind))
      throw new InvalidArgumentError(`signal kind must be 1-32 letters, digits, _ or -, got ${JSON.stringify(kind)}`);
  };
  return {
    async send(kind, text) {
      check(kind);
      const n = sent.get(kind) ?? 0;
      sent.set(kind, n + 1);
      await store.set(key(rank, peer, kind, n), kUtf8Encoder.encode(text));
    },
    async receive(kind, timeoutMs) {
      check(kind);
      // Counted once received: after a timeout, the next receive waits for the same message.
      const n = received.get(kind) ?? 0;
      const bytes = await store.get(key(peer, rank, kind, n), timeoutMs);
      received.set(kind, n + 1);
      return kUtf8.decode(bytes);
    },
  };
}
