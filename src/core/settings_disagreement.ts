/**
 * The digest the ranks compare of their agreed settings' canonical text (agreed_settings.ts) and,
 * when the digests differ, the sentences that name what differs. Nothing here imports the
 * settings table: the engine's thread uses it, and the table (with zod) stays on the caller's.
 */

/** FNV-1a over the text's UTF-8 bytes, as a signed 32-bit integer (it travels in an Int32Array). */
export function digestOf(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(text)) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193);
  }
  return hash | 0;
}

/** At most this many ranks are listed per value, so that a large job's error stays readable. */
const kRanksListed = 8;

function ranksText(ranks: readonly number[]): string {
  const listed = ranks.slice(0, kRanksListed).join(', ');
  const more = ranks.length > kRanksListed ? ` and ${ranks.length - kRanksListed} more` : '';
  return ranks.length === 1 ? `rank ${listed}` : `ranks ${listed}${more}`;
}

/**
 * Every setting whose value differs between the ranks' texts (`texts[r]` is rank r's, lines of
 * `what=value`), one sentence each, such as "RINGREDUCE_SEGMENT_BYTES (init option segmentBytes)
 * differs between ranks: rank 0 has 4194304, rank 1 has 1048576"; empty when they agree.
 */
export function describeDisagreement(texts: readonly string[]): string[] {
  const parsed = texts.map((text) => {
    const values = new Map<string, string>();
    for (const line of text.split('\n')) {
      const at = line.indexOf('=');
      if (at > 0) values.set(line.slice(0, at), line.slice(at + 1));
    }
    return values;
  });
  const settings = [...new Set(parsed.flatMap((values) => [...values.keys()]))];
  const sentences: string[] = [];
  for (const setting of settings) {
    const byValue = new Map<string, number[]>();
    parsed.forEach((values, rank) => {
      // A rank of another version may not know a setting: that differs too.
      const value = values.get(setting) ?? 'not known';
      byValue.set(value, [...(byValue.get(value) ?? []), rank]);
    });
    if (byValue.size < 2) continue;
    const who = [...byValue].map(([value, ranks]) => `${ranksText(ranks)} ${ranks.length === 1 ? 'has' : 'have'} ${value}`);
    sentences.push(`${setting} differs between ranks: ${who.join(', ')}`);
  }
  return sentences;
}
