/**
 * Refused connections are reported rate-limited (rendezvous/report_limiter.ts): a flood of 200
 * strangers at the store server or at the mesh acceptor makes a few reports and one summary
 * that counts the rest, not 200 lines; a quiet window starts over.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { JobKey } from '../../src/rendezvous/auth.js';
import { MeshAcceptor } from '../../src/rendezvous/mesh_acceptor.js';
import { ReportLimiter } from '../../src/rendezvous/report_limiter.js';
import { TcpStoreServer } from '../../src/rendezvous/tcp_store_server.js';

/** `count` connections to host:port, 25 at a time: every other one sends junk, the rest hang up at once. */
async function flood(host: string, port: number, count: number): Promise<void> {
  for (let i = 0; i < count; i += 25) {
    await Promise.all(
      Array.from(
        { length: Math.min(25, count - i) },
        (_, j) =>
          new Promise<void>((resolve) => {
            const socket = net.connect(port, host);
            const timer = setTimeout(() => socket.destroy(), 1000);
            socket.on('error', () => {});
            socket.on('data', () => {});
            socket.on('close', () => {
              clearTimeout(timer);
              resolve();
            });
            socket.on('connect', () => {
              if ((i + j) % 2 === 0) socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
              else socket.end();
            });
          }),
      ),
    );
  }
}

/** The count a summary stands for: 1, or 1 + N for "[and N more refused ...]". */
function counted(lines: readonly string[]): number {
  return lines.reduce((sum, line) => sum + 1 + Number(/\[and (\d+) more refused/.exec(line)?.[1] ?? 0), 0);
}

describe('reports of refused connections', () => {
  it('200 strangers at the store server: five reports and one summary counting the rest', { timeout: 20_000 }, async () => {
    const lines: string[] = [];
    const server = new TcpStoreServer({
      host: '127.0.0.1',
      port: 0,
      key: new JobKey('secret'),
      onRefused: (remote, reason) => lines.push(`refused ${remote}: ${reason}`),
      onProtocolError: (error, remote) => lines.push(`closed ${remote}: ${error.message}`),
    });
    const { port } = await server.listen();
    await flood('127.0.0.1', port, 200);
    await sleep(100);
    assert.equal(lines.length, 5, lines.join('\n'));
    await server.close();
    assert.equal(lines.length, 6, lines.join('\n'));
    assert.match(
      lines[5] ?? '',
      /\[and \d+ more refused in the last 10 s, from 1 address: while they keep coming, one line per 10 s\]$/,
    );
    assert.equal(counted(lines), 200, lines.join('\n'));
  });

  it('200 strangers at the mesh acceptor: the same', { timeout: 20_000 }, async () => {
    const lines: string[] = [];
    const acceptor = new MeshAcceptor({
      rank: 0,
      size: 2,
      jobId: 'flood',
      key: new JobKey('secret'),
      onRefused: (remote, reason) => lines.push(`${remote}: ${reason}`),
    });
    const port = await acceptor.listen('127.0.0.1');
    await flood('127.0.0.1', port, 200);
    await sleep(100);
    assert.equal(lines.length, 5, lines.join('\n'));
    acceptor.destroyAll();
    assert.equal(lines.length, 6);
    assert.equal(counted(lines), 200, lines.join('\n'));
  });

  it('while a flood lasts, one line per window; after a quiet window, full reports again', async () => {
    const lines: string[] = [];
    const limiter = new ReportLimiter({ burst: 2, windowMs: 100 });
    const refuse = (i: number) => limiter.offer(`10.0.0.${i % 3}:${1000 + i}`, (note) => lines.push(`#${i}${note}`));
    for (let i = 0; i < 10; i++) refuse(i);
    assert.deepEqual(lines, ['#0', '#1']);
    await sleep(150); // the first window ends: one summary for #2..#9
    assert.deepEqual(lines.slice(2), [
      '#9 [and 7 more refused in the last 100 ms, from 3 addresses: while they keep coming, one line per 100 ms]',
    ]);
    for (let i = 10; i < 15; i++) refuse(i); // still flooding: counted, not reported
    assert.equal(lines.length, 3);
    await sleep(150);
    assert.match(lines[3] ?? '', /^#14 \[and 4 more refused/);
    await sleep(250); // a quiet window
    refuse(20);
    assert.equal(lines.at(-1), '#20');
    limiter.close();
    refuse(21); // after close: nothing
    assert.equal(lines.at(-1), '#20');
  });
});
