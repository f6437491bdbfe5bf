/**
 * The browser side of a job with browser ranks (ringrun --browser K): everything ringrun runs
 * so that K web pages can be ranks np … np+K-1 next to the -np Node ranks.
 *
 * - The rendezvous store, hosted by ringrun (rank 0 may be a tab, and a tab cannot listen), with
 *   the job's secret; Node ranks reach it over TCP as usual, the tabs' engines through the store
 *   bridge of the browser site (browser_site.ts: the page, its scripts, the tabs of --headless).
 * - The K browser ranks (browser_ranks.ts), which pages take as they join.
 *
 * Every rank of such a job, Node ranks too, runs the `web` backend (transport/web/): its links
 * are WebSockets and, between two tabs, WebRTC data channels.
 */
import { JobKey } from '../../rendezvous/auth.js';
import { TcpStoreServer } from '../../rendezvous/tcp_store.js';
import {
  contractEnv,
  formatHostPort,
  type JobContract,
  jobWideEnv,
  kEnv,
  kLocalAddress,
  type RankPlacement,
} from '../env_contract.js';
import type { BrowserSettings } from '../launch_config.js';
import type { ProcessGuard } from '../orphan_guard.js';
import type { RankSinks } from '../rank_runner.js';
import { BrowserRanks } from './browser_ranks.js';
import { BrowserSite } from './browser_site.js';
import { kPagePaths } from './page_protocol.js';
import { dashboardEnv, reportForwarder } from './report_forwarder.js';

export interface BrowserJobOptions {
  settings: BrowserSettings;
  /** The Node ranks (0 … np-1). */
  np: number;
  jobId: string;
  secret: string;
  /** --address, for the Node ranks' listeners (browsers must reach them). */
  address: string | undefined;
  env: Readonly<Record<string, string | undefined>>;
  /** Stops the headless Chromium should ringrun die without closing it (orphan_guard.ts). */
  guard?: ProcessGuard;
  log(message: string): void;
  debug(message: string): void;
}

export class BrowserJob {
  private ranksOf: BrowserRanks | undefined;
  private closing: Promise<void> | undefined;

  private constructor(
    private readonly options: BrowserJobOptions,
    private readonly store: TcpStoreServer,
    private readonly storePort: number,
    private readonly site: BrowserSite,
  ) {}

  /** Starts the store and the browser site. Throws InvalidArgumentError on a bad script or certificate. */
  static async start(options: BrowserJobOptions): Promise<BrowserJob> {
    const key = new JobKey(options.secret);
    const store = new TcpStoreServer({ host: kLocalAddress, port: 0, key });
    const { port } = await store.listen();
    let job: BrowserJob | undefined;
    try {
      const site = await BrowserSite.start({
        settings: options.settings,
        store: { port, key },
        address: options.address,
        env: options.env,
        ...(options.guard && { guard: options.guard }),
        onControl: (socket) => job?.ranksOf?.onControl(socket),
        log: options.log,
        debug: options.debug,
      });
      job = new BrowserJob(options, store, port, site);
      return job;
    } catch (error) {
      await store.close();
      throw error;
    }
  }

  /** host:port of the store, for the Node ranks (RINGREDUCE_STORE_ADDR). */
  get storeAddr(): string {
    return formatHostPort(kLocalAddress, this.storePort);
  }

  /** The URL a browser opens to become a rank. */
  get joinUrl(): string {
    return this.site.joinUrl;
  }

  /** What every Node rank gets besides the contract: the web backend. */
  nodeEnv(): Record<string, string> {
    return { [kEnv.backend]: 'web' };
  }

  /** The browser ranks, ready for pages to take; `contract` is the job's. */
  ranks(contract: JobContract, sinks: (rank: number) => RankSinks): BrowserRanks {
    const { np, settings } = this.options;
    const hostsBefore = np > 0 ? 1 : 0;
    const crossSize = hostsBefore + settings.count;
    const onReport = reportForwarder(this.options.env);
    this.ranksOf = new BrowserRanks({
      ranks: Array.from({ length: settings.count }, (_, i) => np + i),
      assignment: (rank) => {
        // Each tab is a host of its own: one rank, its own links.
        const placement: RankPlacement = { rank, localRank: 0, localSize: 1, crossRank: hostsBefore + rank - np, crossSize };
        return {
          env: {
            // What a Node rank inherits from ringrun's environment; the flags (in the contract) win.
            ...jobWideEnv(this.options.env),
            ...contractEnv(contract, placement),
            [kEnv.backend]: 'web',
            [kEnv.storeUrl]: this.site.storeUrl,
            ...dashboardEnv(this.options.env),
          },
          args: settings.args,
          programUrl: kPagePaths.program,
          engineUrl: kPagePaths.engine,
        };
      },
      sinks,
      tailLines: 10,
      ...(onReport && { onReport }),
      debug: this.options.debug,
    });
    return this.ranksOf;
  }

  /** The placement of Node rank `rank`: one host, the first. */
  nodePlacement(rank: number): RankPlacement {
    const { np, settings } = this.options;
    return { rank, localRank: rank, localSize: np, crossRank: 0, crossSize: 1 + settings.count, address: this.site.nodeAddress };
  }

  /** Opens the tabs (--headless) or says where to open them. */
  open(): Promise<void> {
    return this.site.open(this.options.settings.count);
  }

  /** Closes the tabs (--headless), the page server and the store. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.site.close();
      await this.store.close();
    })();
    return this.closing;
  }
}
