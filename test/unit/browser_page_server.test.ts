/**
 * The browser ranks' page server and the ranks pages take (src/launcher/browser/): the token
 * path guards everything, responses carry the cross-origin isolation headers, pages get the
 * browser ranks in the order they join, a page too many is refused, and a rank ends as its
 * page says, or fails when its page's socket closes first. Pages here are WebSocket clients
 * speaking the page protocol; test/multiprocess/browser_ranks.test.ts runs real tabs.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { WebSocket } from 'ws';
import { BrowserRanks } from '../../src/launcher/browser/browser_ranks.js';
import type {
  AssignedMessage,
  LauncherToPage,
  PageToLauncher,
  RefusedMessage,
} from '../../src/launcher/browser/page_protocol.js';
import { kRefusedCloseCode } from '../../src/launcher/browser/page_protocol.js';
import { PageServer } from '../../src/launcher/browser/page_server.js';

const bundle = (code: string) => ({ code, assets: new Map<string, string>() });

describe('the page server and the browser ranks', () => {
  let server: PageServer;
  let ranks: BrowserRanks;
  const printed: string[] = [];
  const bridged: string[] = [];

  before(async () => {
    ranks = new BrowserRanks({
      ranks: [2, 3],
      assignment: (rank) => ({
        env: { RINGREDUCE_RANK: String(rank) },
        args: ['--epochs', '1'],
        programUrl: 'program.js',
        engineUrl: 'engine.js',
      }),
      sinks: () => ({ stdout: (text) => printed.push(text), stderr: (text) => printed.push(`err:${text}`) }),
      tailLines: 5,
      debug: () => {},
    });
    server = new PageServer({
      host: '127.0.0.1',
      port: 0,
      boot: bundle('/* boot */'),
      engine: bundle('/* engine */'),
      program: bundle('/* the program */'),
      onControl: (socket) => ranks.onControl(socket),
      onStore: (socket) => {
        bridged.push('store');
        socket.close();
      },
    });
    await server.listen();
  });

  after(() => server.close());

  it('serves the page and its scripts under the token only, cross-origin isolated', async () => {
    const page = await fetch(server.joinUrl());
    assert.equal(page.status, 200);
    assert.equal(page.headers.get('cross-origin-opener-policy'), 'same-origin');
    assert.equal(page.headers.get('cross-origin-embedder-policy'), 'require-corp');
    assert.match(await page.text(), /<script type="module" src="boot.js">/);
    assert.equal(await (await fetch(`${server.joinUrl()}program.js`)).text(), '/* the program */');
    const origin = new URL(server.joinUrl()).origin;
    for (const path of [
      '/',
      '/0123456789abcdef0123456789abcdef/',
      `/${server.token}x/`,
      `/${server.token}/secret.txt`,
      `/${server.token}`,
    ]) {
      assert.equal((await fetch(`${origin}${path}`)).status, 404, path);
    }
  });

  it('refuses WebSockets without the token', async () => {
    const origin = new URL(server.joinUrl()).host;
    const socket = new WebSocket(`ws://${origin}/wrong/control`);
    const error = await new Promise<Error>((resolve) => socket.once('error', resolve));
    assert.match(error.message, /404/);
    assert.deepEqual(bridged, []);
  });

  it('gives pages the browser ranks in the order they join, and refuses one too many', async () => {
    const first = await join();
    const second = await join();
    assert.equal((first.message as AssignedMessage).rank, 2);
    assert.deepEqual((first.message as AssignedMessage).env, { RINGREDUCE_RANK: '2' });
    assert.equal((second.message as AssignedMessage).rank, 3);
    assert.deepEqual(ranks.waiting, []);
    const third = await join();
    assert.equal(third.message.type, 'refused');
    assert.match((third.message as RefusedMessage).reason, /every browser rank of this job \(2\) is taken/);
    assert.equal(await closeCode(third.socket), kRefusedCloseCode);

    // Rank 2 prints and finishes; rank 3's tab closes under it.
    send(first.socket, { type: 'output', stream: 'stdout', text: 'hello\nsecond line\n' });
    send(first.socket, { type: 'output', stream: 'stderr', text: 'careful\n' });
    send(first.socket, { type: 'exit', code: 0 });
    const [two, three] = ranks.ranks;
    const exit2 = await two?.exited;
    assert.equal(exit2?.code, 0);
    assert.deepEqual(printed, ['[2] hello\n[2] second line\n', 'err:[2] careful\n']);
    assert.deepEqual(two?.lastLines(), ['hello', 'second line', 'careful']);
    second.socket.terminate();
    const exit3 = await three?.exited;
    assert.equal(exit3?.code, null);
    assert.match(exit3?.reason ?? '', /closed its tab, or the browser crashed, before its program finished/);
    assert.equal(three?.alive(), false);
  });

  async function join(): Promise<{ socket: WebSocket; message: LauncherToPage }> {
    const socket = new WebSocket(`${server.joinUrl().replace(/^http/, 'ws')}control`);
    await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
    const message = new Promise<LauncherToPage>((resolve) => socket.once('message', (data) => resolve(JSON.parse(String(data)))));
    send(socket, { type: 'join', userAgent: 'Mozilla/5.0 (X11; Linux x86_64) HeadlessChrome/156.0.0.0' });
    return { socket, message: await message };
  }
});

function send(socket: WebSocket, message: PageToLauncher): void {
  socket.send(JSON.stringify(message));
}

function closeCode(socket: WebSocket): Promise<number> {
  return new Promise((resolve) => socket.once('close', (code) => resolve(code)));
}
