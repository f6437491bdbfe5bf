/**
 * The browser side of a job with browser ranks (ringrun --browser K): everything ringrun runs
 * so that K web pages can be ranks np … np+K-1 next to the -np Node ranks.
 *
 * - The rendezvous store, hosted by ringrun (rank 0 may be a tab, and a tab cannot listen), with
 *   the job's secret; Node ranks reach it over TCP as usual, and the tabs' engines through the
 *   store bridge, a WebSocket of the page server (rendezvous/web_store_bridge.ts).
 * - The page server (page_server.ts): the page, its scripts bundled when ringrun starts
 *   (bundles.ts), the control sockets (browser_ranks.ts) and the bridge.
 * - With --headless, the tabs themselves (headless.ts); without, ringrun prints the join URL.
 *
 * Every rank of such a job, Node ranks too, runs the `web` backend (transport/web/): its links
 * are WebSockets and, between two tabs, WebRTC data channels.
 */
import { readFileSync } from 'node:fs';
import { InvalidArgumentError } from '../../core/errors.js';
import { isLoopback, isWildcard } from '../../rendezvous/addresses.js';
import { JobKey } from '../../rendezvous/auth.js';
import type { ChannelLike } from '../../rendezvous/channel.js';
import { TcpStoreClient, TcpStoreServer } from '../../rendezvous/tcp_store.js';
import { WebStoreBridge } from '../../rendezvous/web_store_bridge.js';
import { contractEnv, formatHostPort, type JobContract, kEnv, kLocalAddress, type RankPlacement } from '../env_contract.js';
import type { BrowserSettings } from '../launch_config.js';
import type { RankSinks } from '../rank_runner.js';
import { BrowserRanks } from './browser_ranks.js';
import { bundleProgram, bundleRuntime } from './bundles.js';
import { type HeadlessBrowser, openHeadless } from './headless.js';
import { kPagePaths } from './page_protocol.js';
import { PageServer } from './page_server.js';

export interface BrowserJobOptions {
  settings: BrowserSettings;
  /** The Node ranks (0 … np-1). */
  np: number;
  jobId: string;
  secret: string;
  /** --address, for the Node ranks' listeners (browsers must reach them). */
  address: string | undefined;
  env: Readonly<Record<string, string | undefined>>;
  log(message: string): void;
  debug(message: string): void;
}

export class BrowserJob {
  private ranksOf: BrowserRanks | undefined;
  private headless: HeadlessBrowser | undefined;
  private closing: Promise<void> | undefined;

  private constructor(
    private readonly options: BrowserJobOptions,
    private readonly store: TcpStoreServer,
    private readonly storeClient: TcpStoreClient,
    private readonly storePort: number,
    private readonly server: PageServer,
    /** Where the Node ranks' WebSocket listeners bind and what they advertise. */
    readonly nodeAddress: string,
  ) {}

  /** Bundles the scripts, starts the store and the page server. Throws InvalidArgumentError on a bad script or certificate. */
  static async start(options: BrowserJobOptions): Promise<BrowserJob> {
    const { settings } = options;
    const tls = settings.tls && {
      cert: readPem(settings.tls.certFile, '--https-cert'),
      key: readPem(settings.tls.keyFile, '--https-key'),
    };
    const [{ boot, engine }, program] = await Promise.all([bundleRuntime(), bundleProgram(settings.script)]);
    const key = new JobKey(options.secret);
    const store = new TcpStoreServer({ host: kLocalAddress, port: 0, key });
    const { port: storePort } = await store.listen();
    // The tabs' engines reach the store through this one client (the bridge: the page server's 'store' WebSocket).
    const client = await TcpStoreClient.connect({ host: kLocalAddress, port: storePort, connectTimeoutMs: 5000, key });
    let server: PageServer | undefined;
    try {
      server = new PageServer({
        host: settings.host,
        port: settings.port,
        ...(tls && { tls }),
        boot,
        engine,
        program,
        onControl: (socket) => job.ranksOf?.onControl(socket),
        onStore: (socket, request) => {
          socket.binaryType = 'arraybuffer';
          new WebStoreBridge(socket as unknown as ChannelLike, client, request.socket.remoteAddress ?? 'a page', {
            onProtocolError: (error, remote) =>
              options.debug(`store bridge: closed a connection from ${remote}: ${error.message}`),
          });
        },
      });
      await server.listen();
    } catch (error) {
      await client.close();
      await store.close();
      throw error;
    }
    const nodeAddress =
      options.address ?? (isLoopback(settings.host) ? kLocalAddress : isWildcard(settings.host) ? '0.0.0.0' : settings.host);
    const job: BrowserJob = new BrowserJob(options, store, client, storePort, server, nodeAddress);
    return job;
  }

  /** host:port of the store, for the Node ranks (RINGREDUCE_STORE_ADDR). */
  get storeAddr(): string {
    return formatHostPort(kLocalAddress, this.storePort);
  }

  /** The URL a browser opens to become a rank. */
  get joinUrl(): string {
    return this.server.joinUrl();
  }

  /** What every Node rank gets besides the contract: the web backend, and a listener browsers reach. */
  nodeEnv(): Record<string, string> {
    return { [kEnv.backend]: 'web' };
  }

  /** The browser ranks, ready for pages to take; `contract` is the job's. */
  ranks(contract: JobContract, sinks: (rank: number) => RankSinks): BrowserRanks {
    const { np, settings } = this.options;
    const hostsBefore = np > 0 ? 1 : 0;
    const crossSize = hostsBefore + settings.count;
    const ranks = Array.from({ length: settings.count }, (_, i) => np + i);
    this.ranksOf = new BrowserRanks({
      ranks,
      assignment: (rank) => {
        const placement: RankPlacement = { rank, localRank: 0, localSize: 1, crossRank: hostsBefore + rank - np, crossSize };
        return {
          env: { ...contractEnv(contract, placement), [kEnv.backend]: 'web', [kEnv.storeUrl]: this.server.storeUrl() },
          args: settings.args,
          programUrl: kPagePaths.program,
          engineUrl: kPagePaths.engine,
        };
      },
      sinks,
      tailLines: 10,
      debug: this.options.debug,
    });
    return this.ranksOf;
  }

  /** The placement of Node rank `rank`: one host, the first. */
  nodePlacement(rank: number): RankPlacement {
    const { np, settings } = this.options;
    return { rank, localRank: rank, localSize: np, crossRank: 0, crossSize: 1 + settings.count, address: this.nodeAddress };
  }

  /** Opens the tabs (--headless) or says where to open them. */
  async open(): Promise<void> {
    const { settings } = this.options;
    if (!settings.headless) {
      this.options.log(
        `open ${settings.count === 1 ? 'this URL in a browser tab' : `this URL in ${settings.count} browser tabs`} to start the browser ranks: ${this.joinUrl}`,
      );
      return;
    }
    this.headless = await openHeadless(this.joinUrl, settings.count, this.options.env, this.options.log);
  }

  /** Closes the tabs (--headless), the page server and the store. Idempotent. */
  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    await this.headless?.close();
    await this.server.close();
    await this.storeClient.close();
    await this.store.close();
  }
}

function readPem(path: string, flag: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new InvalidArgumentError(`${flag} ${path}: ${(error as Error).message}`);
  }
}
