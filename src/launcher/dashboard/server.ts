/**
 * The dashboard's HTTP server, in the launcher. Read-only for viewers:
 *
 *   GET  /?token=T              the page (assets under /assets/, shipped in the package)
 *   GET  /api/state?token=T&since=S   the job's state, and the chart points after S (seconds)
 *   GET  /api/timeline?token=T  the merged timeline of the last minutes (when one is written)
 *   POST /ingest/<ingest token> a rank's report (engine/reporting/dashboard_reporter.ts)
 *
 * Two random tokens: T is in the printed URL (viewers), the ingest token only in the ranks'
 * environment, so a viewer cannot feed the page. Both are required on every address, loopback
 * included (other users of a machine share its loopback).
 *
 * The page can never slow the job: the server runs in the launcher, not in the ranks; a state
 * is serialised at most twice a second whatever the number of viewers; connections are capped
 * (kMaxConnections), requests must arrive within kRequestTimeoutMs and bodies are capped, and a
 * client that stops reading loses its socket after kIdleTimeoutMs.
 */
import { timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RankReport } from '../../engine/reporting/dashboard_reporter.js';
import { kIngestPath } from '../../observability/dashboard_target.js';
import type { DashboardModel } from './model.js';
import { mergedTimeline } from './timeline_window.js';

export const kMaxConnections = 128;
const kMaxBodyBytes = 256 * 1024;
const kRequestTimeoutMs = 10_000;
const kIdleTimeoutMs = 15_000;
const kStateCacheMs = 500;
const kSampleMs = 1000;

/** The page's files, with their content types; nothing else is served from disk. */
const kAssets: Readonly<Record<string, string>> = {
  'app.js': 'text/javascript; charset=utf-8',
  'style.css': 'text/css; charset=utf-8',
  'uPlot.iife.min.js': 'text/javascript; charset=utf-8',
  'uPlot.min.css': 'text/css; charset=utf-8',
};
const kPageDir = new URL('./page/', import.meta.url);

const kSecurityHeaders = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'",
};

export interface DashboardServerOptions {
  host: string;
  port: number;
  model: DashboardModel;
  /** In the page's URL. */
  viewToken: string;
  /** In the ranks' environment. */
  ingestToken: string;
}

export class DashboardServer {
  private cached: { key: string; json: string } | undefined;
  private sampler: NodeJS.Timeout | undefined;
  /** Whether a viewer has read the state after the job ended. */
  private finalSeen = false;
  /** When a viewer last read the state (Date.now()). */
  private lastViewAt = 0;

  private constructor(
    private readonly server: Server,
    private readonly options: DashboardServerOptions,
  ) {
    this.sampler = setInterval(() => options.model.sample(), kSampleMs);
    this.sampler.unref();
  }

  static async start(options: DashboardServerOptions): Promise<DashboardServer> {
    let self: DashboardServer | undefined;
    const server = createServer((req, res) => self?.handle(req, res));
    server.maxConnections = kMaxConnections;
    server.requestTimeout = kRequestTimeoutMs;
    server.headersTimeout = kRequestTimeoutMs;
    server.keepAliveTimeout = 5000;
    server.setTimeout(kIdleTimeoutMs, (socket) => socket.destroy());
    server.on('clientError', (_error, socket) => socket.destroy());
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port, options.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    self = new DashboardServer(server, options);
    return self;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** The page's URL, token included, for a viewer reaching the server at `host`. */
  pageUrl(host: string): string {
    const h = host.includes(':') ? `[${host}]` : host;
    return `http://${h}:${this.port}/?token=${this.options.viewToken}`;
  }

  /**
   * Whether to keep serving after the job ended: until a viewer who watched in the last 10 s has
   * read the final state (so the page shows how the job ended), for `maxMs` at most.
   */
  async linger(maxMs: number): Promise<void> {
    const deadline = Date.now() + maxMs;
    while (Date.now() < deadline && !this.finalSeen && Date.now() - this.lastViewAt < 10_000) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  async close(): Promise<void> {
    clearInterval(this.sampler);
    this.sampler = undefined;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://dashboard');
    } catch {
      this.send(res, 400, 'text/plain; charset=utf-8', 'bad request\n');
      return;
    }
    const path = url.pathname;
    if (req.method === 'POST' && path.startsWith(kIngestPath)) {
      this.ingest(req, res, path.slice(kIngestPath.length));
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('allow', 'GET, HEAD');
      this.send(res, 405, 'text/plain; charset=utf-8', 'read-only: GET only\n');
      req.resume();
      return;
    }
    if (path.startsWith('/assets/')) {
      void this.asset(res, path.slice('/assets/'.length));
      return;
    }
    if (path !== '/' && path !== '/index.html' && path !== '/api/state' && path !== '/api/timeline') {
      this.send(res, 404, 'text/plain; charset=utf-8', 'not found\n');
      return;
    }
    if (!sameToken(url.searchParams.get('token'), this.options.viewToken)) {
      this.send(res, 403, 'text/plain; charset=utf-8', 'wrong or missing token: open the URL ringrun printed\n');
      return;
    }
    if (path === '/api/state') this.state(res, url.searchParams.get('since'));
    else if (path === '/api/timeline') void this.timeline(res);
    else void this.asset(res, 'index.html');
  }

  private state(res: ServerResponse, sinceText: string | null): void {
    const model = this.options.model;
    this.lastViewAt = Date.now();
    if (model.isOver) this.finalSeen = true;
    // At most one serialisation per kStateCacheMs whatever the viewers and reports; the job's end at once.
    const key = `${Math.floor(Date.now() / kStateCacheMs)}/${model.isOver}`;
    if (this.cached?.key !== key) this.cached = { key, json: JSON.stringify(model.state()) };
    const since = Number(sinceText ?? 0);
    const series = JSON.stringify(model.seriesSince(Number.isFinite(since) ? since : 0));
    this.send(res, 200, 'application/json', `{"state":${this.cached.json},"series":${series}}`);
  }

  private async timeline(res: ServerResponse): Promise<void> {
    const files = this.options.model.timelineFiles();
    if (files.length === 0) {
      this.send(
        res,
        404,
        'text/plain; charset=utf-8',
        'no timeline: no rank on this host writes one (ringrun --timeline, RINGREDUCE_TIMELINE)\n',
      );
      return;
    }
    const trace = await mergedTimeline(files, Date.now());
    res.setHeader('content-disposition', 'attachment; filename="ringreduce-timeline.json"');
    this.send(res, 200, 'application/json', JSON.stringify(trace));
  }

  private async asset(res: ServerResponse, name: string): Promise<void> {
    const type = name === 'index.html' ? 'text/html; charset=utf-8' : kAssets[name];
    if (type === undefined) {
      this.send(res, 404, 'text/plain; charset=utf-8', 'not found\n');
      return;
    }
    try {
      this.send(res, 200, type, await readFile(new URL(name, kPageDir)));
    } catch {
      this.send(res, 500, 'text/plain; charset=utf-8', `the page's file ${name} is missing: run npm run build\n`);
    }
  }

  private ingest(req: IncomingMessage, res: ServerResponse, token: string): void {
    if (!sameToken(token, this.options.ingestToken)) {
      req.resume();
      this.send(res, 403, 'text/plain; charset=utf-8', 'wrong token\n');
      return;
    }
    const chunks: Buffer[] = [];
    let bytes = 0;
    req.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes > kMaxBodyBytes) {
        this.send(res, 413, 'text/plain; charset=utf-8', 'too large\n');
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('error', () => {});
    req.on('end', () => {
      if (res.headersSent) return;
      const report = parseReport(Buffer.concat(chunks).toString('utf8'));
      if (report === undefined || !this.options.model.ingest(report)) {
        this.send(res, 400, 'text/plain; charset=utf-8', 'not a report of this job\n');
        return;
      }
      res.writeHead(204, kSecurityHeaders).end();
    });
  }

  private send(res: ServerResponse, status: number, type: string, body: string | Buffer): void {
    if (res.headersSent) return;
    res.writeHead(status, { ...kSecurityHeaders, 'content-type': type, 'content-length': Buffer.byteLength(body) });
    res.end(res.req?.method === 'HEAD' ? undefined : body);
  }
}

function sameToken(given: string | null, expected: string): boolean {
  if (given === null) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** A report, if `text` is one in shape (the fields the model reads); undefined otherwise. */
function parseReport(text: string): RankReport | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const r = value as Partial<RankReport>;
  const isInt = (n: unknown) => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;
  if (
    !isInt(r.rank) ||
    !isInt(r.size) ||
    !(r.pid === null || isInt(r.pid)) ||
    typeof r.t !== 'number' ||
    typeof r.state !== 'string'
  )
    return undefined;
  if (!['starting', 'running', 'idle', 'failed', 'finished'].includes(r.state)) return undefined;
  if (!Array.isArray(r.pending) || !Array.isArray(r.warnings) || typeof r.host !== 'string') return undefined;
  if (r.stats !== undefined && (typeof r.stats !== 'object' || r.stats === null)) return undefined;
  return r as RankReport;
}
