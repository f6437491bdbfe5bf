/**
 * Browser ranks' links next to the raw links they run on, in one run (docs/browser.md):
 *
 *   npm run build && node dist/bench/browser_links.js [--mib 16] [--reps 4] [--small 300]
 *
 * 1. Raw, in headless Chromium (puppeteer-core) with ringrun's flags: a page's worker and this
 *    process over one WebSocket, 256 KiB messages up (what a browser rank's sender uses:
 *    Chromium carries them faster than larger ones) and 1 MiB down; two pages' workers over one
 *    RTCDataChannel, 64 KiB messages each way (as the transport's). Flow control on
 *    bufferedAmount as the transport does it (refilled in the 'bufferedamountlow' event on a
 *    data channel). Each transfer is `--mib` MiB once to warm the link, as the ringreduce side's
 *    first message does, then `--reps` times, which the receiver times. Then the median round
 *    trip of 4-byte messages on each (`--small` of them).
 * 2. ringreduce: `ringrun -np 2 --browser 2 --headless` running bench/browser_rank.ts: rr.send
 *    and rr.recv of `--mib` MiB over the same kinds of link (Node rank 0 ↔ tab 2: WebSocket; tab 2
 *    ↔ tab 3: data channel; Node 0 ↔ Node 1: WebSocket between Node ranks), a `--mib` MiB
 *    allreduce on the 4 ranks (its bus bandwidth against the slowest raw link), 4-byte
 *    allreduces (p50 and mean), and 4-byte round trips of rr.send and rr.recv on each link.
 * 3. The floors, every participant busy at once as in the job: a raw all-to-all round of 4-byte
 *    messages among 2 Node endpoints and 2 tabs (browser_round.ts), under the 4-byte allreduce;
 *    both tabs exchanging `--mib` MiB each way with a Node endpoint (browser_leaf_exchange.ts),
 *    under the large allreduce, which runs through the Node ranks.
 *
 * Needs Chromium (CHROME_PATH, or /usr/bin/chromium) and a default route (WebRTC's addresses).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command } from 'commander';
import puppeteer, { type Page } from 'puppeteer-core';
import { type WebSocket, WebSocketServer } from 'ws';
import { kHeadlessFlags } from '../src/launcher/browser/headless.js';
import { rawLeafExchange } from './browser_leaf_exchange.js';
import { rawRound } from './browser_round.js';
import { idlePercent, machineLine } from './machine.js';

const kRoot = fileURLToPath(new URL('../../', import.meta.url));
const kChromium = process.env.CHROME_PATH ?? '/usr/bin/chromium';
const kFlags = ['--no-sandbox', ...kHeadlessFlags];
const kIsolation = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' };

const options = new Command('browser_links')
  .option('--mib <n>', 'MiB per timed transfer', '16')
  .option('--reps <n>', 'transfers per figure', '4')
  .option('--small <n>', '4-byte allreduces timed', '300')
  .parse()
  .opts<{ mib: string; reps: string; small: string }>();
const bytes = Number(options.mib) * 1024 * 1024;

/** The raw probes' page: a worker that runs one probe and posts its figure to the page. */
const kPage = `<script type="module">
const params = new URLSearchParams(location.search);
const worker = new Worker('worker.js' + location.search, { type: 'module' });
worker.onmessage = (e) => { window.result = e.data; };
if (params.get('probe') === 'dc') {
  const side = params.get('side');
  const signal = new WebSocket('ws://' + location.host + '/signal?side=' + side);
  const pc = new RTCPeerConnection();
  const channel = pc.createDataChannel('raw', { negotiated: true, id: 0, ordered: true });
  worker.postMessage({ channel }, [channel]);
  const gathered = () => new Promise((r) => pc.iceGatheringState === 'complete' ? r() :
    pc.addEventListener('icegatheringstatechange', () => pc.iceGatheringState === 'complete' && r()));
  signal.onmessage = async (e) => {
    const d = JSON.parse(e.data);
    await pc.setRemoteDescription(d);
    if (d.type === 'offer') { await pc.setLocalDescription(await pc.createAnswer()); await gathered(); signal.send(JSON.stringify(pc.localDescription)); }
  };
  if (side === 'a') signal.onopen = async () => { await pc.setLocalDescription(await pc.createOffer()); await gathered(); signal.send(JSON.stringify(pc.localDescription)); };
}
</script>`;

const kWorker = `
const params = new URLSearchParams(location.search);
const bytes = Number(params.get('bytes'));
const reps = Number(params.get('reps'));
/** One transfer warms the link; the receiver times the reps after it. */
const total = bytes * (reps + 1);
const wait = (ms) => new Promise((r) => setTimeout(r, ms));
/** Sends total bytes in messages of chunk bytes, pausing while bufferedAmount is at high. */
function sendAll(channel, chunk, high) {
  const data = new Uint8Array(chunk);
  let sent = 0;
  if ('bufferedAmountLowThreshold' in channel) {
    // A data channel announces the drain: refill in its event, as the transport's sender does.
    channel.bufferedAmountLowThreshold = high / 4;
    return new Promise((resolve) => {
      const pump = () => {
        for (; sent < total && channel.bufferedAmount < high; sent += chunk) channel.send(data);
        if (sent < total) return;
        channel.removeEventListener('bufferedamountlow', pump);
        resolve();
      };
      channel.addEventListener('bufferedamountlow', pump);
      pump();
    });
  }
  return (async () => {
    for (; sent < total; sent += chunk) {
      while (channel.bufferedAmount >= high) await wait(1);
      channel.send(data);
    }
  })();
}
function receiveAll(channel) {
  return new Promise((resolve) => {
    let got = 0, started = 0;
    channel.addEventListener('message', (e) => {
      if (typeof e.data === 'string') return;
      got += e.data.byteLength;
      if (started === 0 && got >= bytes) started = performance.now();
      if (got >= total) resolve((total - bytes) / (performance.now() - started) / 1000);
    });
  });
}
/** The median round trip (µs) of 4-byte messages the other side echoes. */
async function roundTrips(channel, count) {
  const ping = new Uint8Array(4);
  const times = [];
  let echo = () => {};
  channel.addEventListener('message', (e) => e.data.byteLength === 4 && echo());
  for (let i = 0; i < count; i++) {
    const echoed = new Promise((r) => { echo = r; });
    const started = performance.now();
    channel.send(ping);
    await echoed;
    times.push(performance.now() - started);
  }
  times.sort((x, y) => x - y);
  return times[Math.floor(times.length / 2)] * 1000;
}
const pings = Number(params.get('pings'));
if (params.get('probe') === 'ws') {
  const ws = new WebSocket('ws://' + location.host + '/ws'); ws.binaryType = 'arraybuffer';
  const down = receiveAll(ws);
  ws.onopen = async () => { await sendAll(ws, 256 << 10, 8 << 20); };
  ws.onmessage = async (e) => {
    if (typeof e.data !== 'string') return;
    const up = Number(e.data);
    ws.send('down');
    const downRate = await down;
    ws.send('echo');
    postMessage({ up, down: downRate, rttUs: await roundTrips(ws, pings) });
  };
} else {
  onmessage = async (e) => {
    const channel = e.data.channel; channel.binaryType = 'arraybuffer';
    const side = params.get('side');
    const received = receiveAll(channel);
    await new Promise((r) => channel.readyState === 'open' ? r() : channel.addEventListener('open', r, { once: true }));
    if (side === 'a') await sendAll(channel, 64 << 10, 1 << 20);
    const mine = await received;
    if (side === 'b') {
      channel.addEventListener('message', (e) => e.data.byteLength === 4 && channel.send(e.data));
      await sendAll(channel, 64 << 10, 1 << 20);
      postMessage({ received: mine });
    } else postMessage({ received: mine, rttUs: await roundTrips(channel, pings) });
  };
}
`;

interface RawFigures {
  wsUp: number;
  wsDown: number;
  dcAtoB: number;
  dcBtoA: number;
  /** Median round trips of 4-byte messages, µs. */
  wsRttUs: number;
  dcRttUs: number;
}

/** The raw links, in headless Chromium. */
async function raw(): Promise<RawFigures> {
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    const body = path === '/' ? kPage : path === '/worker.js' ? kWorker : undefined;
    if (body === undefined) return void res.writeHead(404).end();
    res.writeHead(200, { ...kIsolation, 'content-type': path === '/' ? 'text/html' : 'text/javascript' }).end(body);
  });
  const sockets = new WebSocketServer({ noServer: true });
  const signals = new Map<string, WebSocket>();
  server.on('upgrade', (req, socket, head) =>
    sockets.handleUpgrade(req, socket, head, (ws) => {
      const url = new URL(req.url ?? '/', 'http://x');
      if (url.pathname === '/signal') {
        const side = url.searchParams.get('side') as string;
        signals.set(side, ws);
        ws.on('message', (data) => signals.get(side === 'a' ? 'b' : 'a')?.send(String(data)));
        return;
      }
      // The page's worker sends `total` bytes (up), then asks for as many (down), then has its
      // pings echoed; the first `bytes` of each warm the link, the rest is timed.
      const total = bytes * (Number(options.reps) + 1);
      let got = 0;
      let started = 0;
      let echo = false;
      ws.on('message', (data: Buffer, binary) => {
        if (echo) return void ws.send(data);
        if (!binary && String(data) === 'echo') {
          echo = true;
          return;
        }
        if (!binary) {
          const chunk = Buffer.alloc(1 << 20);
          const next = (sent: number): void => {
            if (sent >= total) return;
            ws.send(chunk, () => next(sent + chunk.length));
          };
          next(0);
          return;
        }
        got += data.length;
        if (started === 0 && got >= bytes) started = performance.now();
        if (got >= total) ws.send(String((total - bytes) / (performance.now() - started) / 1000));
      });
    }),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const profile = mkdtempSync(join(tmpdir(), 'ringreduce-bench-chromium-'));
  const browser = await puppeteer.launch({ executablePath: kChromium, headless: true, userDataDir: profile, args: kFlags });

  const result = async <T>(page: Page): Promise<T> => {
    // Polled on a timer: a tab in the background runs no animation frames.
    await page.waitForFunction('window.result !== undefined', { timeout: 120_000, polling: 100 });
    return page.evaluate('window.result') as Promise<T>;
  };
  try {
    const wsPage = await browser.newPage();
    await wsPage.goto(`${origin}/?probe=ws&bytes=${bytes}&reps=${options.reps}&pings=${options.small}`);
    const ws = await result<{ up: number; down: number; rttUs: number }>(wsPage);
    const [a, b] = [await browser.newPage(), await browser.newPage()];
    await b.goto(`${origin}/?probe=dc&side=b&bytes=${bytes}&reps=${options.reps}&pings=${options.small}`);
    await a.goto(`${origin}/?probe=dc&side=a&bytes=${bytes}&reps=${options.reps}&pings=${options.small}`);
    // One after the other: b has the first figure long before a has the second.
    const atB = await result<{ received: number }>(b);
    const atA = await result<{ received: number; rttUs: number }>(a);
    return {
      wsUp: ws.up,
      wsDown: ws.down,
      dcAtoB: atB.received,
      dcBtoA: atA.received,
      wsRttUs: ws.rttUs,
      dcRttUs: atA.rttUs,
    };
  } finally {
    await browser.close();
    rmSync(profile, { recursive: true, force: true });
    for (const client of sockets.clients) client.terminate();
    server.closeAllConnections();
    server.close();
  }
}

interface RingreduceFigures {
  size: number;
  links: Record<string, number>;
  /** Median round trips of 4-byte rr.send/rr.recv, µs, by pair. */
  rtts: Record<string, number>;
  allreduce: { ms: number; busMBps: number };
  small: { p50: number; mean: number };
}

/** ringreduce on 2 Node ranks and 2 headless tabs. */
function ringreduce(): Promise<RingreduceFigures> {
  const child = spawn(
    process.execPath,
    [
      join(kRoot, 'bin/ringrun.js'),
      '-np',
      '2',
      '--browser',
      '2',
      '--headless',
      process.execPath,
      join(kRoot, 'dist/bench/browser_rank.js'),
      '--mib',
      options.mib,
      '--reps',
      options.reps,
      '--small',
      options.small,
      '--pairs',
      '0-2,2-3,0-1',
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (text: string) => {
    out += text;
  });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => {
      const match = /BENCH-RESULT (\{.*\})/.exec(out);
      if (code === 0 && match) resolve(JSON.parse(match[1] as string) as RingreduceFigures);
      else reject(new Error(`ringrun exited ${code}\n${out}`));
    });
  });
}

/**
 * The floors measured with every participant busy at once, in a browser of their own: the raw
 * all-to-all round of 4-byte messages (browser_round.ts) and the leaves' raw exchange of the
 * hub allreduce (browser_leaf_exchange.ts).
 */
async function floors(): Promise<{ round: { p50Us: number; meanUs: number }; leafMs: number }> {
  const profile = mkdtempSync(join(tmpdir(), 'ringreduce-bench-chromium-'));
  const browser = await puppeteer.launch({ executablePath: kChromium, headless: true, userDataDir: profile, args: kFlags });
  try {
    const round = await rawRound(browser, Number(options.small));
    return { round, leafMs: await rawLeafExchange(browser, bytes) };
  } finally {
    await browser.close();
    rmSync(profile, { recursive: true, force: true });
  }
}

const idle = await idlePercent();
const rawFigures = await raw();
const floor = await floors();
const ours = await ringreduce();
const mbps = (value: number | undefined) => (value === undefined ? '-' : value.toFixed(1).padStart(7));
const ratio = (a: number | undefined, b: number) => (a === undefined ? '-' : `${((100 * a) / b).toFixed(0)} %`);
console.log(machineLine(idle));
console.log(`${options.mib} MiB per transfer, ${options.reps} transfers per figure; MB/s as the receiver sees it\n`);
console.log('| link | raw (MB/s) | ringreduce (MB/s) | ringreduce / raw |');
console.log('|---|---:|---:|---:|');
const rows: [string, number, number | undefined][] = [
  ['WebSocket, tab → Node (rank 2 → 0)', rawFigures.wsUp, ours.links['2->0']],
  ['WebSocket, Node → tab (rank 0 → 2)', rawFigures.wsDown, ours.links['0->2']],
  ['data channel, tab → tab (rank 2 → 3)', rawFigures.dcAtoB, ours.links['2->3']],
  ['data channel, tab → tab (rank 3 → 2)', rawFigures.dcBtoA, ours.links['3->2']],
];
for (const [name, rawRate, ourRate] of rows)
  console.log(`| ${name} | ${mbps(rawRate)} | ${mbps(ourRate)} | ${ratio(ourRate, rawRate)} |`);
console.log(`| WebSocket, Node → Node (rank 0 → 1, 1 → 0) | | ${mbps(ours.links['0->1'])}, ${mbps(ours.links['1->0'])} | |`);
const slowest = Math.min(rawFigures.wsUp, rawFigures.wsDown, rawFigures.dcAtoB, rawFigures.dcBtoA);
console.log(
  `\nallreduce of ${options.mib} MiB on 2 Node ranks + 2 tabs: ${ours.allreduce.ms.toFixed(0)} ms, bus bandwidth ${ours.allreduce.busMBps.toFixed(1)} MB/s = ${ratio(ours.allreduce.busMBps, slowest)} of the slowest raw link (${slowest.toFixed(1)} MB/s); ` +
    `both tabs exchanging ${options.mib} MiB each way with a Node endpoint at once, raw (the floor of the allreduce through hubs): ${floor.leafMs.toFixed(0)} ms, ${ratio(floor.leafMs, ours.allreduce.ms)} of the allreduce's time`,
);
console.log(
  `allreduce of 4 B on the same ranks: p50 ${(ours.small.p50 / 1000).toFixed(2)} ms, mean ${(ours.small.mean / 1000).toFixed(2)} ms; ` +
    `raw all-to-all round of 4 B on the same kinds of link (the floor): p50 ${(floor.round.p50Us / 1000).toFixed(2)} ms, mean ${(floor.round.meanUs / 1000).toFixed(2)} ms`,
);
const ms = (us: number | undefined) => (us === undefined ? '-' : (us / 1000).toFixed(2));
console.log('\n| round trip of 4 B (p50, ms) | raw | ringreduce (rr.send, rr.recv) |');
console.log('|---|---:|---:|');
console.log(`| WebSocket, tab ↔ Node (ranks 2, 0) | ${ms(rawFigures.wsRttUs)} | ${ms(ours.rtts['0-2'])} |`);
console.log(`| data channel, tab ↔ tab (ranks 2, 3) | ${ms(rawFigures.dcRttUs)} | ${ms(ours.rtts['2-3'])} |`);
console.log(`| WebSocket, Node ↔ Node (ranks 0, 1) | | ${ms(ours.rtts['0-1'])} |`);
