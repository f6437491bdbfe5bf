/**
 * The floor under a small collective on 2 Node ranks and 2 tabs: rounds of 4-byte messages
 * from every participant to every other over the links a browser job runs on, and nothing else
 * (browser_links.ts prints it next to the 4-byte allreduce).
 *
 * Four participants, as in the job: two Node endpoints, each in a worker thread of its own
 * with a WebSocket server (the Node ranks' engines), and two pages whose workers dial both over
 * WebSocket and reach each other over one RTCDataChannel (the tabs' engines); the Node endpoints
 * talk over a WebSocket too. A round: each participant sends its round number to the three
 * others and starts the next round once it has the three messages of this one (a faster peer's
 * next round may arrive first: counted by round). That is the all-to-all exchange a 4-byte
 * allreduce costs (engine/ready/eager_exchange.ts), without ringreduce's work around it: the
 * program's hand-off to its engine, the reports' encoding, the reduction. Tab a times `rounds`
 * rounds after 50 that warm up; the figure is their median and mean.
 */
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { Worker } from 'node:worker_threads';
import type { Browser, Page } from 'puppeteer-core';
import { type WebSocket, WebSocketServer } from 'ws';

const kIsolation = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' };
const kWarmRounds = 50;

/** Shared by the tabs' workers and the Node endpoints (as source text): the round logic. */
const kRounds = `
function roundRunner(peers, total, onDone) {
  const counts = new Map();
  const times = [];
  let round = 0;
  let started = 0;
  const send = () => {
    const message = new Uint32Array([round]);
    for (const peer of peers) peer.send(message);
  };
  const onMessage = (data) => {
    const r = new Uint32Array(data.buffer ? data.buffer.slice(data.byteOffset, data.byteOffset + 4) : data)[0];
    counts.set(r, (counts.get(r) ?? 0) + 1);
    while (counts.get(round) === peers.length) {
      counts.delete(round);
      const now = performance.now();
      if (round >= 1) times.push(now - started);
      started = now;
      round++;
      if (round === total) return onDone(times);
      send();
    }
  };
  return { start: () => { started = performance.now(); send(); }, onMessage };
}
`;

const kPage = `<script type="module">
const params = new URLSearchParams(location.search);
const worker = new Worker('worker.js' + location.search, { type: 'module' });
worker.onmessage = (e) => { window.result = e.data; };
const side = params.get('side');
const signal = new WebSocket('ws://' + location.host + '/signal?side=' + side);
const pc = new RTCPeerConnection();
const channel = pc.createDataChannel('round', { negotiated: true, id: 0, ordered: true });
worker.postMessage({ channel }, [channel]);
const gathered = () => new Promise((r) => pc.iceGatheringState === 'complete' ? r() :
  pc.addEventListener('icegatheringstatechange', () => pc.iceGatheringState === 'complete' && r()));
signal.onmessage = async (e) => {
  const d = JSON.parse(e.data);
  await pc.setRemoteDescription(d);
  if (d.type === 'offer') { await pc.setLocalDescription(await pc.createAnswer()); await gathered(); signal.send(JSON.stringify(pc.localDescription)); }
};
if (side === 'a') signal.onopen = async () => { await pc.setLocalDescription(await pc.createOffer()); await gathered(); signal.send(JSON.stringify(pc.localDescription)); };
</script>`;

const kWorker = `${kRounds}
const params = new URLSearchParams(location.search);
const total = Number(params.get('rounds'));
const open = (socket) => new Promise((r) => socket.readyState === 1 ? r() : socket.addEventListener('open', r, { once: true }));
onmessage = async (e) => {
  const channel = e.data.channel; channel.binaryType = 'arraybuffer';
  const sockets = params.get('ports').split(',').map((port) => {
    const ws = new WebSocket('ws://127.0.0.1:' + port + '/?side=' + params.get('side'));
    ws.binaryType = 'arraybuffer';
    return ws;
  });
  const peers = [channel, ...sockets];
  const runner = roundRunner(peers, total, (times) => postMessage(times));
  // Listening from the start: a faster participant's first round may come before the rest is up.
  for (const peer of peers) peer.addEventListener('message', (m) => typeof m.data !== 'string' && runner.onMessage(m.data));
  // Every participant starts once all links are up: the Node endpoints say so, and the channel
  // to the other tab is open.
  const go = new Promise((r) => sockets[0].addEventListener('message', (m) => m.data === 'go' && r()));
  await Promise.all([go, open(channel)]);
  runner.start();
};
`;

/** A Node endpoint (worker thread): a WebSocket server for the tabs and the other endpoint. */
const kEndpoint = `${kRounds}
const { parentPort, workerData } = require('node:worker_threads');
const { WebSocketServer, WebSocket } = require(workerData.ws);
const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
const peers = [];
const runner = roundRunner(peers, workerData.total, () => {});
const add = (ws) => {
  ws.on('message', (data, binary) => binary && runner.onMessage(data));
  peers.push(ws);
  if (peers.length === 3) parentPort.postMessage('linked');
};
server.on('connection', add);
server.on('listening', () => parentPort.postMessage(server.address().port));
parentPort.on('message', (m) => {
  if (m.dial) { const ws = new WebSocket('ws://127.0.0.1:' + m.dial); ws.on('open', () => add(ws)); }
  if (m === 'go') {
    for (const ws of peers) ws.send('go');
    runner.start();
  }
});
`;

/** Median and mean round (µs) of the raw exchange, `rounds` timed after the warm-up. */
export async function rawRound(browser: Browser, rounds: number): Promise<{ p50Us: number; meanUs: number }> {
  const total = kWarmRounds + rounds + 1;
  const wsPath = createRequire(import.meta.url).resolve('ws');
  const endpoints = [0, 1].map(() => new Worker(kEndpoint, { eval: true, workerData: { ws: wsPath, total } }));
  const next = (worker: Worker) => new Promise<unknown>((resolve) => worker.once('message', resolve));
  const ports = (await Promise.all(endpoints.map(next))) as number[];
  const linked = endpoints.map(next);
  endpoints[0]?.postMessage({ dial: ports[1] });

  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    const body = path === '/' ? kPage : path === '/worker.js' ? kWorker : undefined;
    if (body === undefined) return void res.writeHead(404).end();
    res.writeHead(200, { ...kIsolation, 'content-type': path === '/' ? 'text/html' : 'text/javascript' }).end(body);
  });
  const signals = new Map<string, WebSocket>();
  const sockets = new WebSocketServer({ server, path: '/signal' });
  sockets.on('connection', (ws, req) => {
    const side = new URL(req.url ?? '/', 'http://x').searchParams.get('side') as string;
    signals.set(side, ws);
    ws.on('message', (data) => signals.get(side === 'a' ? 'b' : 'a')?.send(String(data)));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const pages: Page[] = [];
  try {
    for (const side of ['b', 'a']) {
      const page = await browser.newPage();
      pages.push(page);
      await page.goto(`${origin}/?side=${side}&rounds=${total}&ports=${ports.join(',')}`);
    }
    await Promise.all(linked);
    for (const endpoint of endpoints) endpoint.postMessage('go');
    const a = pages[1] as Page;
    await a.waitForFunction('window.result !== undefined', { timeout: 120_000, polling: 100 });
    const times = ((await a.evaluate('window.result')) as number[]).slice(kWarmRounds);
    const sorted = [...times].sort((x, y) => x - y);
    const mean = times.reduce((s, t) => s + t, 0) / times.length;
    return { p50Us: (sorted[Math.floor(sorted.length / 2)] as number) * 1000, meanUs: mean * 1000 };
  } finally {
    for (const page of pages) await page.close();
    for (const endpoint of endpoints) await endpoint.terminate();
    for (const client of sockets.clients) client.terminate();
    server.closeAllConnections();
    server.close();
  }
}
