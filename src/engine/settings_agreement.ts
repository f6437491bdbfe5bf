/**
 * The start-up check that every rank runs with the same agreed settings (core/agreed_settings.ts:
 * segment size, algorithms, fusion threshold, ...): ranks that differ would hang or compute
 * wrongly at their first collective; instead every rank's init() fails naming what differs.
 *
 * How it works: each rank's stamp (the digest and length of its canonical text) rides in the
 * start-up exchange of placements (topology.ts), which costs no round of its own. Every rank then
 * holds every stamp and decides alike: when all are the same, nothing more is sent. Otherwise
 * (only when something is wrong) the ranks allgather their texts, so that the error can say which
 * setting differs and which rank has which value; every rank builds the same message from them.
 */
import { ringAllgather } from '../algorithms/ring_allgather.js';
import { MismatchError } from '../core/errors.js';
import { describeDisagreement, digestOf } from '../core/settings_disagreement.js';
import type { Transport } from '../transport/transport.js';
import { kStartupTag } from './wire/tags.js';

/** What a rank tells the others of its agreed settings in the start-up exchange. */
export interface SettingsStamp {
  /** The digest of its canonical text (core/agreed_settings.ts). */
  readonly digest: number;
  /** The length of the text in UTF-8 bytes: the block it sends if the digests differ. */
  readonly bytes: number;
}

export class SettingsAgreement {
  readonly stamp: SettingsStamp;
  private readonly encoded: Uint8Array;

  /** `text`: this rank's agreed settings, as the caller's thread wrote them (core/agreed_settings.ts). */
  constructor(text: string) {
    this.encoded = new TextEncoder().encode(text);
    this.stamp = { digest: digestOf(text), bytes: this.encoded.length };
  }

  /**
   * Resolves when every rank's stamp is this rank's; otherwise rejects, on every rank alike, with
   * a MismatchError naming each setting that differs. Every rank calls it with the same stamps.
   */
  async check(transport: Transport, stamps: readonly SettingsStamp[]): Promise<void> {
    const { digest, bytes } = stamps[0] ?? this.stamp;
    if (stamps.every((s) => s.digest === digest && s.bytes === bytes)) return;
    const counts = stamps.map((s) => s.bytes);
    const all = new Uint8Array(counts.reduce((a, b) => a + b, 0));
    let at = 0;
    for (let r = 0; r < transport.rank; r++) at += counts[r] as number;
    all.set(this.encoded, at);
    // The same tag as the exchange of stamps: its messages are matched already (first in, first out per peer and tag).
    await ringAllgather(transport, all, counts, kStartupTag);
    const decoder = new TextDecoder();
    let offset = 0;
    const texts = counts.map((n) => {
      const text = decoder.decode(all.subarray(offset, offset + n));
      offset += n;
      return text;
    });
    const sentences = describeDisagreement(texts);
    const what =
      sentences.length > 0
        ? sentences.join('; ')
        : `the settings that must be the same on every rank differ (digests ${stamps.map((s) => s.digest).join(', ')})`;
    throw new MismatchError(
      `${what}; set ${sentences.length > 1 ? 'them' : 'it'} alike on every rank (docs/env.md, "Settings every rank must share")`,
    );
  }
}
