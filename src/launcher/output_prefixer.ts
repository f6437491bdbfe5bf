import { StringDecoder } from 'node:string_decoder';

/** A line with no newline for this long is cut into pieces, so memory stays bounded. */
const kMaxLineLength = 64 * 1024;

/** The prefix of a rank's output lines, e.g. `[3] `. */
export function rankPrefix(rank: number): string {
  return `[${rank}] `;
}

/**
 * Cuts a byte stream into lines and writes each one with a prefix. Chunk boundaries may fall
 * anywhere: inside a line, between the `\r` and `\n` of a CRLF, or inside a multi-byte UTF-8
 * character (the StringDecoder holds those bytes back). The complete lines of one chunk are
 * written in a single `write` call, so lines of different ranks interleave but never mix.
 * Call `end()` when the stream ends: it writes the last line even without a newline.
 */
export class OutputPrefixer {
  private readonly decoder = new StringDecoder('utf8');
  private partial = '';

  constructor(
    private readonly prefix: string,
    private readonly write: (text: string) => void,
    /**
     * Sees each line without prefix or line ending (for tails and log files); returning false
     * drops the line (ringrun's own start marker of a remote rank).
     */
    private readonly onLine: (line: string) => unknown = () => undefined,
    private readonly maxLineLength = kMaxLineLength,
  ) {}

  push(chunk: Buffer | string): void {
    const text = this.partial + (typeof chunk === 'string' ? chunk : this.decoder.write(chunk));
    let out = '';
    let start = 0;
    for (let nl = text.indexOf('\n'); nl >= 0; nl = text.indexOf('\n', start)) {
      out += this.line(text.slice(start, nl));
      start = nl + 1;
    }
    let rest = text.slice(start);
    while (rest.length >= this.maxLineLength) {
      out += this.line(rest.slice(0, this.maxLineLength));
      rest = rest.slice(this.maxLineLength);
    }
    this.partial = rest;
    if (out.length > 0) this.write(out);
  }

  end(): void {
    const rest = this.partial + this.decoder.end();
    this.partial = '';
    if (rest.length > 0) this.write(this.line(rest));
  }

  private line(raw: string): string {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (this.onLine(line) === false) return '';
    return `${this.prefix}${line}\n`;
  }
}
