/**
 * A browser rank in a real browser: Debian's chromium, headless, driven by puppeteer-core. A tiny
 * static server (with the COOP/COEP headers that give a page SharedArrayBuffer) serves a page
 * whose boot script (fixtures/browser_page.ts) starts the program worker
 * (fixtures/browser_program.ts, bundled here by esbuild for the browser, so `#platform` is the
 * browser's) and answers its request for an engine with launcher/browser/page/engine_host.ts,
 * which starts dist/browser/engine_worker.js. The program runs a job of one rank: init(), the
 * async and ...Sync collectives the TF.js adapter calls (the ...Sync ones take their completions
 * from the sync mailbox, one large enough that it grows), object collectives, shutdown(). The
 * object codec's bytes in the browser equal Node's; on the page's main thread a ...Sync call is
 * refused, saying why. Skipped, saying why, where chromium is not installed.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import puppeteer, { type Browser } from 'puppeteer-core';
import { encodeObject } from '../../src/api/object_codec.js';
import { kCodecProbe } from './fixtures/codec_probe.js';

const kChromium = process.env.CHROME_PATH ?? process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const kFlags = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const kEngineBundle = fileURLToPath(new URL('../../browser/engine_worker.js', import.meta.url));

const skip = existsSync(kChromium) ? false : `no chromium at ${kChromium} (apt-get install chromium; CHROME_PATH)`;

/** `entry` (a compiled fixture) bundled for the browser, as text. */
async function bundle(entry: string): Promise<string> {
  const result = await build({
    entryPoints: [fileURLToPath(new URL(entry, import.meta.url))],
    bundle: true,
    platform: 'browser',
    format: 'esm',
    write: false,
    logLevel: 'warning',
  });
  return result.outputFiles[0]?.text ?? '';
}

/** Serves `files` by path, each with the headers that make the page cross-origin isolated. */
async function serve(files: Record<string, { type: string; body: string }>): Promise<{ server: Server; url: string }> {
  const server = createServer((request, response) => {
    const file = files[new URL(request.url ?? '/', 'http://localhost').pathname];
    const isolation = {
      'cross-origin-opener-policy': 'same-origin',
      'cross-origin-embedder-policy': 'require-corp',
      'cache-control': 'no-store',
    };
    if (file === undefined) {
      response.writeHead(404, isolation).end();
      return;
    }
    response.writeHead(200, { ...isolation, 'content-type': file.type }).end(file.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/` };
}

interface TestState {
  result?: Record<string, unknown>;
  error?: string;
  engineOutput: string[];
  mainThreadSync?: string;
  crossOriginIsolated: boolean;
}

let browser: Browser | undefined;
let server: Server | undefined;
let origin = '';
let profile = '';

before(async () => {
  if (skip) return;
  const js = 'text/javascript';
  const [page, program] = await Promise.all([bundle('./fixtures/browser_page.js'), bundle('./fixtures/browser_program.js')]);
  ({ server, url: origin } = await serve({
    '/': {
      type: 'text/html',
      body: '<!doctype html><title>ringreduce browser rank</title><script type="module" src="page.js"></script>',
    },
    '/page.js': { type: js, body: page },
    '/program.js': { type: js, body: program },
    '/engine.js': { type: js, body: readFileSync(kEngineBundle, 'utf8') },
  }));
  profile = mkdtempSync(join(tmpdir(), 'ringreduce-chromium-'));
  browser = await puppeteer.launch({ executablePath: kChromium, headless: true, userDataDir: profile, args: kFlags });
});

after(async () => {
  await browser?.close();
  server?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

/** Opens the page at `hash` and waits until the program has reported; what the page saw, and the console's lines. */
async function runPage(hash = ''): Promise<{ state: TestState; consoleLines: string[] }> {
  const tab = await (browser as Browser).newPage();
  const consoleLines: string[] = [];
  tab.on('console', (message) => consoleLines.push(`${message.type()}: ${message.text()}`));
  tab.on('pageerror', (error) => consoleLines.push(`pageerror: ${(error as Error).message}`));
  try {
    await tab.goto(`${origin}${hash}`, { waitUntil: 'load' });
    await tab.waitForFunction('window.__ringreduceTest?.result !== undefined || window.__ringreduceTest?.error !== undefined', {
      timeout: 60_000,
    });
    return { state: (await tab.evaluate('window.__ringreduceTest')) as TestState, consoleLines };
  } finally {
    await tab.close();
  }
}

it('a browser rank of a job of one: init, async and ...Sync collectives, objects, shutdown', {
  skip,
  timeout: 90_000,
}, async (t) => {
  const { state, consoleLines } = await runPage();
  t.diagnostic(`init took ${Math.round(Number(state.result?.initMs))} ms in the browser`);
  assert.equal(state.error, undefined, `${state.error}\nconsole:\n${consoleLines.join('\n')}`);
  assert.equal(state.crossOriginIsolated, true);
  assert.equal(
    state.mainThreadSync,
    "allreduceSync blocks its thread (Atomics.wait), which a browser does not allow on a page's main thread: await allreduce() instead, or run the program in a worker (ringrun's page does)",
  );
  const result = state.result as Record<string, unknown>;
  assert.deepEqual({ rank: result.rank, size: result.size, backend: result.backend }, { rank: 0, size: 1, backend: 'solo' });
  assert.deepEqual(result.asyncSum, [1, 2, 3]);
  assert.deepEqual(result.syncSum, [4, 5]);
  assert.deepEqual(result.gathered, { shape: [2, 2], data: [7, 8, 9, 10] });
  assert.deepEqual(result.large, { length: 1 << 21, shared: true, ok: true });
  assert.deepEqual(result.alltoall, { output: [1, 2, 3], shape: [3], receivedSplits: [3] });
  assert.deepEqual(result.gather, [6]);
  assert.deepEqual(result.scattered, { shape: [2, 2], data: [1, 2, 3, 4] });
  assert.equal(result.broadcast, (2n ** 62n).toString());
  assert.deepEqual(result.object, [
    ['lr', 0.01],
    ['layers', [64, 10]],
  ]);
  assert.deepEqual(result.objectSync, [{ rank: 0 }]);
  assert.equal(result.afterSync, 2);
  assert.equal(
    result.codecHex,
    Buffer.from(encodeObject(kCodecProbe)).toString('hex'),
    "the object codec's bytes, browser and Node",
  );
  assert.equal(result.completed, 12);
  assert.deepEqual(state.engineOutput, [
    'ringreduce [rank 0] WARN: a browser rank writes no timeline (it has no file system): trace.json is ignored\n',
  ]);
});

it("an engine script that does not load fails the program's init(), saying so", { skip, timeout: 60_000 }, async () => {
  const { state } = await runPage('#missing-engine');
  assert.equal(state.result, undefined);
  assert.match(
    state.error ?? '',
    /^RingReduceError: the ringreduce engine worker failed: its script http:\/\/127\.0\.0\.1:\d+\/missing\.js did not load\n/,
  );
});
