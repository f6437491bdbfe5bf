/**
 * The web server of a job's browser ranks, run by ringrun: the page, its scripts, and two
 * WebSocket endpoints (the page's control socket, the engines' store bridge).
 *
 * Everything lives under a secret path, `/<token>/`: the join URL is a capability, and a request
 * without the token gets a plain 404, as for a path that does not exist (nothing says a job is
 * there). The path, rather than a query string, so that relative URLs (the scripts, the wasm
 * files TF.js fetches next to its script) carry the token without knowing it.
 *
 * Every response is sent with the headers that make the page cross-origin isolated
 * (`Cross-Origin-Opener-Policy: same-origin`, `Cross-Origin-Embedder-Policy: require-corp`):
 * browsers give SharedArrayBuffer, which a rank's engine shares with its program, only to such
 * pages, and only on localhost or over https. With a certificate and key, the server speaks
 * https (and the WebSockets wss).
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { Duplex } from 'node:stream';
import { type WebSocket, WebSocketServer } from 'ws';
import { formatHostPort } from '../env_contract.js';
import type { Bundle } from './bundles.js';
import { kPagePaths } from './page_protocol.js';

export interface PageServerOptions {
  host: string;
  /** 0: a free port. */
  port: number;
  /** https with this certificate and key (PEM text); unset: http. */
  tls?: { cert: string; key: string };
  boot: Bundle;
  engine: Bundle;
  program: Bundle;
  /** A page's control socket (kPagePaths.control). */
  onControl(socket: WebSocket, request: IncomingMessage): void;
  /** An engine's store connection (kPagePaths.store). */
  onStore(socket: WebSocket, request: IncomingMessage): void;
}

const kIsolation = {
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-embedder-policy': 'require-corp',
  'cross-origin-resource-policy': 'same-origin',
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
} as const;

/** Control messages are small; a store value is at most an address or a description. */
const kMaxSocketMessageBytes = 1024 * 1024;

export class PageServer {
  readonly token = randomBytes(16).toString('hex');
  private readonly server: Server;
  private readonly sockets = new WebSocketServer({ noServer: true, maxPayload: kMaxSocketMessageBytes });
  private readonly files: ReadonlyMap<string, { type: string; body: () => Promise<string | Buffer> }>;
  private port = 0;

  constructor(private readonly options: PageServerOptions) {
    const text = (type: string, body: string) => ({ type, body: async () => body });
    const files = new Map<string, { type: string; body: () => Promise<string | Buffer> }>([
      [kPagePaths.page, text('text/html; charset=utf-8', kPageHtml)],
      [kPagePaths.boot, text('text/javascript; charset=utf-8', options.boot.code)],
      [kPagePaths.engine, text('text/javascript; charset=utf-8', options.engine.code)],
      [kPagePaths.program, text('text/javascript; charset=utf-8', options.program.code)],
    ]);
    const map = options.program.map;
    if (map !== undefined) files.set(`${kPagePaths.program}.map`, text('application/json', map));
    for (const [name, path] of options.program.assets) files.set(name, { type: 'application/wasm', body: () => readFile(path) });
    this.files = files;
    const handler = (req: IncomingMessage, res: ServerResponse) => void this.serve(req, res);
    this.server = options.tls ? createHttpsServer(options.tls, handler) : createHttpServer(handler);
    this.server.on('upgrade', (req, socket, head) => this.upgrade(req, socket, head));
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.options.port, this.options.host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    const address = this.server.address();
    this.port = typeof address === 'object' && address !== null ? address.port : this.options.port;
  }

  /** The join URL, for a browser that reaches this machine as `host`. */
  joinUrl(host = this.options.host): string {
    const scheme = this.options.tls ? 'https' : 'http';
    const shown = host === '0.0.0.0' || host === '::' ? 'localhost' : host;
    return `${scheme}://${formatHostPort(shown, this.port)}/${this.token}/`;
  }

  /** The store bridge's URL, for the engines of the pages this server serves. */
  storeUrl(host = this.options.host): string {
    return this.joinUrl(host).replace(/^http/, 'ws') + kPagePaths.store;
  }

  async close(): Promise<void> {
    for (const client of this.sockets.clients) client.terminate();
    this.server.closeAllConnections?.();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** The part of `url` after `/<token>/`, or undefined when the token is not there. */
  private route(url: string | undefined): string | undefined {
    const path = (url ?? '').split('?', 1)[0] ?? '';
    const match = /^\/([0-9a-f]+)\/(.*)$/.exec(path);
    if (match === null) return undefined;
    const given = Buffer.from(match[1] as string);
    const expected = Buffer.from(this.token);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
    return match[2];
  }

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const name = this.route(req.url);
    const file = name === undefined ? undefined : this.files.get(name);
    if (file === undefined || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { ...kIsolation, 'content-type': 'text/plain; charset=utf-8' }).end('not found\n');
      return;
    }
    try {
      const body = await file.body();
      res.writeHead(200, { ...kIsolation, 'content-type': file.type, 'content-length': Buffer.byteLength(body) });
      res.end(req.method === 'HEAD' ? undefined : body);
    } catch (error) {
      res.writeHead(500, { ...kIsolation, 'content-type': 'text/plain; charset=utf-8' }).end(`${(error as Error).message}\n`);
    }
  }

  private upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const name = this.route(req.url);
    const handler =
      name === kPagePaths.control ? this.options.onControl : name === kPagePaths.store ? this.options.onStore : undefined;
    if (handler === undefined) {
      socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n');
      return;
    }
    this.sockets.handleUpgrade(req, socket, head, (ws) => handler(ws, req));
  }
}

const kPageHtml = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>ringreduce rank</title>
<link rel="icon" href="data:,">
<style>
  body { font: 15px/1.5 system-ui, sans-serif; margin: 3rem auto; max-width: 40rem; padding: 0 1rem; color: #1a202c; }
  #status { font-size: 1.2rem; }
  .note { color: #4a5568; font-size: 0.9rem; }
</style>
</head>
<body>
<h1>ringreduce</h1>
<p id="status">Joining the job…</p>
<p class="note">This tab is a rank of a ringreduce job: its program runs in a Web Worker of this page.
Closing the tab takes the rank out of the job.</p>
<script type="module" src="${kPagePaths.boot}"></script>
</body>
</html>
`;
