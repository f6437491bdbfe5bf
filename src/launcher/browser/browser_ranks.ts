/**
 * The browser ranks of a job and the pages that take them: each page that connects its control
 * socket and says `join` gets the lowest free browser rank, in the order pages join; a page
 * that comes when every rank is taken (a tab opened once too often) is told so and closed,
 * and the job goes on. A page must say `join` within kJoinTimeoutMs of connecting. (An elastic
 * job takes pages as they come: elastic_driver.ts, with acceptPage.)
 */
import type { WebSocket } from 'ws';
import type { RankSinks } from '../rank_runner.js';
import { type Assignment, BrowserRank } from './browser_rank.js';
import { kRefusedCloseCode, type LauncherToPage, type PageToLauncher } from './page_protocol.js';

const kJoinTimeoutMs = 10_000;

export interface BrowserRanksOptions {
  /** The ranks browsers take, in the order pages get them. */
  ranks: readonly number[];
  assignment(rank: number): Assignment;
  sinks(rank: number): RankSinks;
  tailLines: number;
  /** With --dashboard: where the pages' reports go (report_forwarder.ts). */
  onReport?: (rank: BrowserRank, body: string) => void;
  /** ringrun's --verbose messages. */
  debug(message: string): void;
}

export class BrowserRanks {
  readonly ranks: readonly BrowserRank[];

  constructor(private readonly options: BrowserRanksOptions) {
    this.ranks = options.ranks.map(
      (rank) => new BrowserRank(rank, options.assignment(rank), options.sinks(rank), options.tailLines, options.onReport),
    );
  }

  /** The ranks no page has taken yet. */
  get waiting(): number[] {
    return this.ranks.filter((rank) => rank.free).map((rank) => rank.rank);
  }

  /** A page's control socket (the page server checked the token). */
  onControl(socket: WebSocket): void {
    acceptPage(socket, this.options.debug, () => {
      const rank = this.ranks.find((r) => r.free);
      if (rank !== undefined) return rank;
      this.options.debug('a page came when every browser rank was taken; it was told so');
      return `every browser rank of this job (${this.options.ranks.length}) is taken`;
    });
  }
}

/**
 * Reads a page's `join` (within kJoinTimeoutMs) and gives it the rank `take` returns, or refuses
 * it with the reason `take` returns instead.
 */
export function acceptPage(socket: WebSocket, debug: (message: string) => void, take: () => BrowserRank | string): void {
  const timer = setTimeout(() => refuse(socket, 'said nothing after connecting'), kJoinTimeoutMs);
  socket.once('close', () => clearTimeout(timer));
  socket.once('message', (data) => {
    clearTimeout(timer);
    let message: PageToLauncher;
    try {
      message = JSON.parse(String(data)) as PageToLauncher;
    } catch {
      refuse(socket, 'not a join message');
      return;
    }
    if (message.type !== 'join') {
      refuse(socket, 'not a join message');
      return;
    }
    const rank = take();
    if (typeof rank === 'string') {
      refuse(socket, rank);
      return;
    }
    rank.attach(socket, String(message.userAgent ?? ''));
    debug(`rank ${rank.rank} joined from ${rank.host}`);
  });
}

function refuse(socket: WebSocket, reason: string): void {
  if (socket.readyState === 1) socket.send(JSON.stringify({ type: 'refused', reason } satisfies LauncherToPage));
  socket.close(kRefusedCloseCode, reason.slice(0, 120));
}
