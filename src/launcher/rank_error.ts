/**
 * The error a rank died of, read from its last lines of output: the block Node prints for an
 * uncaught exception or an unhandled rejection (the same that `console.error(error)` prints):
 *
 * ```
 * file:///app/train.js:5          <- where it was thrown, the source line and a caret
 *   throw new Error('bad batch');
 *   ^
 *
 * Error: bad batch                 <- the header: name and message (a message may span lines)
 *     at file:///app/train.js:5:9  <- its frames, indented four spaces
 *     at ... {
 *   code: 'ERR_RR_PEER_FAILURE',   <- its own properties, a PeerFailureError's peerRank among them
 *   peerRank: 1
 * }
 *
 * Node.js v20.19.0
 * ```
 *
 * ringrun reads it to show the error itself in its report (not the frames after it) and to
 * tell a rank that failed on its own from one that died because a peer failed (a
 * PeerFailureError, whose peerRank names that peer).
 *
 * A rank whose JavaScript heap is full prints no error block: V8 prints a line
 * `FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory` with its
 * native frames and the process aborts (SIGABRT). That line is read as the rank's error, marked
 * `outOfMemory`, and so is an error that says a worker thread ran out of memory.
 */

export interface RankError {
  /** The header's first line: "Error: bad batch", "PeerFailureError: rank 1 failed: ...". */
  summary: string;
  name: string;
  /** The rank a PeerFailureError blames (its `peerRank`): this rank died because that one failed. */
  peerRank?: number;
  /** The rank (or one of its threads) ran out of memory. */
  outOfMemory?: true;
  /** Where the error is in the lines it was read from: its header, and the end of its first frames (exclusive). */
  start: number;
  end: number;
}

/** The frames shown after an error's header. */
export const kShownFrames = 5;
/** A message longer than this many lines is not told from other output. */
const kMaxMessageLines = 20;
/** A top-level frame: an error's `cause` and an AggregateError's errors print theirs further indented. */
const kFrame = /^ {4}at \S/;
/** `Name`, `Name: message`, or Node's own `TypeError [ERR_CODE]: message`. */
const kHeader = /^([A-Za-z_$][\w$]*)(?: \[[\w.]+\])?(?:: |$)/;
const kErrorName = /(?:Error|Exception)$/;

/** V8's last words when a heap reaches its limit (the main thread's; a worker's is an error block). */
const kFatalOutOfMemory = /^FATAL ERROR: .*JavaScript heap out of memory/;
/** An error saying that memory ran out: ERR_WORKER_OUT_OF_MEMORY's message, V8's "heap out of memory". */
const kOutOfMemoryMessage = /heap out of memory|reaching memory limit/i;

/** The last error in `lines` (oldest first): V8's out-of-memory line or an error block; undefined when they hold none. */
export function findRankError(lines: readonly string[]): RankError | undefined {
  const block = findErrorBlock(lines);
  let fatal = lines.length - 1;
  while (fatal >= 0 && !kFatalOutOfMemory.test(lines[fatal] as string)) fatal--;
  if (fatal >= 0 && (block === undefined || fatal > block.start)) {
    return { summary: lines[fatal] as string, name: 'FATAL ERROR', outOfMemory: true, start: fatal, end: fatal + 1 };
  }
  if (block !== undefined && kOutOfMemoryMessage.test(block.summary)) block.outOfMemory = true;
  return block;
}

function findErrorBlock(lines: readonly string[]): RankError | undefined {
  let first = -1;
  for (let i = lines.length - 1; i >= 0; i--) {
    if (kFrame.test(lines[i] ?? '') && !kFrame.test(lines[i - 1] ?? '')) {
      first = i;
      break;
    }
  }
  if (first <= 0) return undefined;
  const start = headerBefore(lines, first);
  if (start === undefined) return undefined;
  let last = first;
  while (kFrame.test(lines[last + 1] ?? '')) last++;
  const summary = lines[start] as string;
  const name = (kHeader.exec(summary) as RegExpExecArray)[1] as string;
  const peerRank = name === 'PeerFailureError' ? peerRankAfter(lines, last + 1) : undefined;
  return {
    summary,
    name,
    ...(peerRank !== undefined && { peerRank }),
    start,
    end: Math.min(last + 1, first + kShownFrames),
  };
}

/**
 * The lines to show of a rank's output: its last `count` lines, or, when they hold an error,
 * the lines up to its first frames, the error's header always among them.
 */
export function linesToShow(lines: readonly string[], error: RankError | undefined, count: number): string[] {
  if (error === undefined) return lines.slice(Math.max(0, lines.length - count));
  const from = Math.min(error.start, Math.max(0, error.end - count));
  const shown = lines.slice(from, Math.min(error.end, from + count));
  // The last frame before the error's own properties ends with their opening brace.
  const last = shown.length - 1;
  if (last >= 0 && kFrame.test(shown[last] as string)) shown[last] = (shown[last] as string).replace(/ \{$/, '');
  return shown;
}

/** The nearest header above the first frame: one named ...Error or ...Exception, else any. */
function headerBefore(lines: readonly string[], first: number): number | undefined {
  const lowest = Math.max(0, first - 1 - kMaxMessageLines);
  let any: number | undefined;
  for (let i = first - 1; i >= lowest; i--) {
    const match = kHeader.exec(lines[i] ?? '');
    if (match === null) continue;
    if (kErrorName.test(match[1] as string)) return i;
    any ??= i;
  }
  return any;
}

/** `peerRank: N` among the properties printed after the frames (up to the closing brace). */
function peerRankAfter(lines: readonly string[], from: number): number | undefined {
  for (let i = from; i < lines.length && lines[i] !== '}'; i++) {
    const match = /^ {2}peerRank: (\d+),?$/.exec(lines[i] as string);
    if (match) return Number(match[1]);
  }
  return undefined;
}
