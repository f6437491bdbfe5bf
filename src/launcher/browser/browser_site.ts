/**
 * What ringrun serves to the browser ranks of a job, whoever holds the store: the page server
 * (page_server.ts) with its scripts (bundles.ts), the store bridge from its `store` WebSocket to
 * the job's store (one TCP client, authenticated with the job's secret), and, with --headless,
 * the tabs (headless.ts). Pages' control sockets go to `onControl`: the fixed ranks of a job
 * (browser_ranks.ts) or the elastic driver's newcomers.
 */
import { readFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import type { WebSocket } from 'ws';
import { InvalidArgumentError } from '../../core/errors.js';
import { isLoopback, isWildcard } from '../../rendezvous/addresses.js';
import type { JobKey } from '../../rendezvous/auth.js';
import type { ChannelLike } from '../../rendezvous/channel.js';
import { TcpStoreClient } from '../../rendezvous/tcp_store.js';
import { WebStoreBridge } from '../../rendezvous/web_store_bridge.js';
import { kLocalAddress } from '../env_contract.js';
import type { BrowserSettings } from '../launch_config.js';
import type { ProcessGuard } from '../orphan_guard.js';
import { bundleProgram, bundleRuntime } from './bundles.js';
import { type HeadlessBrowser, openHeadless } from './headless.js';
import { PageServer } from './page_server.js';

export interface BrowserSiteOptions {
  settings: BrowserSettings;
  /** The job's store, on this machine, and the key it wants. */
  store: { port: number; key: JobKey };
  /** --address: where Node ranks' listeners bind (browsers must reach them). */
  address: string | undefined;
  env: Readonly<Record<string, string | undefined>>;
  /** Stops the headless Chromium should ringrun die without closing it (orphan_guard.ts). */
  guard?: ProcessGuard;
  onControl(socket: WebSocket, request: IncomingMessage): void;
  log(message: string): void;
  debug(message: string): void;
}

export class BrowserSite {
  private headless: HeadlessBrowser | undefined;
  private closing: Promise<void> | undefined;

  private constructor(
    private readonly options: BrowserSiteOptions,
    private readonly server: PageServer,
    private readonly storeClient: TcpStoreClient,
    /** Where the Node ranks' WebSocket listeners bind and what they advertise (RINGREDUCE_ADDRESS). */
    readonly nodeAddress: string,
  ) {}

  /** Bundles the program, connects to the store and serves the page. Throws InvalidArgumentError on a bad script or certificate. */
  static async start(options: BrowserSiteOptions): Promise<BrowserSite> {
    const { settings } = options;
    const tls = settings.tls && {
      cert: readPem(settings.tls.certFile, '--https-cert'),
      key: readPem(settings.tls.keyFile, '--https-key'),
    };
    const [{ boot, engine }, program] = await Promise.all([bundleRuntime(), bundleProgram(settings.script)]);
    const client = await TcpStoreClient.connect({
      host: kLocalAddress,
      port: options.store.port,
      connectTimeoutMs: 5000,
      key: options.store.key,
    });
    const server = new PageServer({
      host: settings.host,
      port: settings.port,
      ...(tls && { tls }),
      boot,
      engine,
      program,
      onControl: options.onControl,
      onStore: (socket, request) => {
        socket.binaryType = 'arraybuffer';
        new WebStoreBridge(socket as unknown as ChannelLike, client, request.socket.remoteAddress ?? 'a page', {
          onProtocolError: (error, remote) => options.debug(`store bridge: closed a connection from ${remote}: ${error.message}`),
        });
      },
    });
    try {
      await server.listen();
    } catch (error) {
      await client.close();
      throw error;
    }
    const host = settings.host;
    const nodeAddress = options.address ?? (isLoopback(host) ? kLocalAddress : isWildcard(host) ? '0.0.0.0' : host);
    return new BrowserSite(options, server, client, nodeAddress);
  }

  /** The URL a browser opens to become a rank. */
  get joinUrl(): string {
    return this.server.joinUrl();
  }

  /** The store bridge's URL (RINGREDUCE_STORE_URL of the browser ranks). */
  get storeUrl(): string {
    return this.server.storeUrl();
  }

  /** Opens `count` tabs (--headless), or says where to open them. */
  async open(count: number): Promise<void> {
    if (!this.options.settings.headless) {
      const tabs = count === 1 ? 'a browser tab' : `${count} browser tabs`;
      this.options.log(`open this URL in ${tabs} to start the browser ranks: ${this.joinUrl}`);
      return;
    }
    this.headless = await openHeadless(this.joinUrl, count, this.options.env, this.options.log, this.options.guard);
    this.options.debug(`browser ranks join at ${this.joinUrl}`);
  }

  /** Closes the tabs it opened, the page server and the bridge. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.headless?.close();
      await this.server.close();
      await this.storeClient.close();
    })();
    return this.closing;
  }
}

function readPem(path: string, flag: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new InvalidArgumentError(`${flag} ${path}: ${(error as Error).message}`);
  }
}
