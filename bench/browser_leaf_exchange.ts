/**
 * The floor under a large allreduce on 2 Node ranks and 2 tabs that runs through the Node ranks
 * (algorithms/hub_allreduce.ts): what the leaves' links carry, raw, both tabs at once
 * (browser_links.ts prints it next to the allreduce).
 *
 * Each tab's worker and a Node endpoint of its own (a worker thread with a WebSocket server,
 * standing for its hub) exchange `bytes` each way at the same time, the two pairs together, as
 * the hub allreduce's leaves do: the tab sends in 256 KiB messages and the endpoint in 1 MiB ones,
 * with flow control on bufferedAmount as the transport's. One exchange warms the links; the
 * figure is the second, from the start signal until both tabs have sent and received all.
 * Unlike one link timed alone, the two pairs share the machine's cores as the job's ranks do.
 */
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { Worker } from 'node:worker_threads';
import type { Browser, Page } from 'puppeteer-core';

const kIsolation = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' };
const kPage = `<script type="module">
const worker = new Worker('worker.js' + location.search, { type: 'module' });
worker.onmessage = (e) => { window.result = e.data; };
</script>`;

const kWorker = `
const params = new URLSearchParams(location.search);
const bytes = Number(params.get('bytes'));
const wait = (ms) => new Promise((r) => setTimeout(r, ms));
const ws = new WebSocket('ws://127.0.0.1:' + params.get('port')); ws.binaryType = 'arraybuffer';
let got = 0, onGot = () => {};
ws.onmessage = (e) => {
  if (typeof e.data === 'string') return onStart();
  got += e.data.byteLength;
  if (got >= bytes) onGot();
};
async function sendAll() {
  const chunk = new Uint8Array(256 << 10);
  for (let sent = 0; sent < bytes; sent += chunk.length) {
    while (ws.bufferedAmount >= (8 << 20)) await wait(1);
    ws.send(chunk);
  }
  while (ws.bufferedAmount > 0) await wait(1);
}
const times = [];
async function onStart() {
  got = 0;
  const received = new Promise((r) => { onGot = r; });
  const started = performance.now();
  await Promise.all([sendAll(), received]);
  times.push(performance.now() - started);
  ws.send('done');
  if (times.length === 2) postMessage(times[1]);
}
`;

const kEndpoint = `
const { parentPort, workerData } = require('node:worker_threads');
const { WebSocketServer } = require(workerData.ws);
const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
let socket;
server.on('listening', () => parentPort.postMessage(server.address().port));
server.on('connection', (ws) => {
  socket = ws;
  ws.on('message', (data, binary) => { if (!binary) parentPort.postMessage('done'); });
  parentPort.postMessage('linked');
});
parentPort.on('message', () => {
  socket.send('go');
  const chunk = Buffer.alloc(1 << 20);
  const next = (sent) => { if (sent < workerData.bytes) socket.send(chunk, () => next(sent + chunk.length)); };
  next(0);
});
`;

/** Milliseconds for both tabs to exchange `bytes` each way with their endpoints at once. */
export async function rawLeafExchange(browser: Browser, bytes: number): Promise<number> {
  const wsPath = createRequire(import.meta.url).resolve('ws');
  const endpoints = [0, 1].map(() => new Worker(kEndpoint, { eval: true, workerData: { ws: wsPath, bytes } }));
  const next = (worker: Worker) => new Promise<unknown>((resolve) => worker.once('message', resolve));
  const ports = (await Promise.all(endpoints.map(next))) as number[];
  const linked = endpoints.map(next);
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    const body = path === '/' ? kPage : path === '/worker.js' ? kWorker : undefined;
    if (body === undefined) return void res.writeHead(404).end();
    res.writeHead(200, { ...kIsolation, 'content-type': path === '/' ? 'text/html' : 'text/javascript' }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const pages: Page[] = [];
  try {
    for (const port of ports) {
      const page = await browser.newPage();
      pages.push(page);
      await page.goto(`${origin}/?bytes=${bytes}&port=${port}`);
    }
    await Promise.all(linked);
    for (let run = 0; run < 2; run++) {
      const done = endpoints.map(next);
      for (const endpoint of endpoints) endpoint.postMessage('go');
      await Promise.all(done);
    }
    const times: number[] = [];
    for (const page of pages) {
      await page.waitForFunction('window.result !== undefined', { timeout: 120_000, polling: 100 });
      times.push((await page.evaluate('window.result')) as number);
    }
    return Math.max(...times);
  } finally {
    for (const page of pages) await page.close();
    for (const endpoint of endpoints) await endpoint.terminate();
    server.closeAllConnections();
    server.close();
  }
}
