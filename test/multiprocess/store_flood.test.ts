/**
 * A flood at a running job's store (a port scan, a misdirected client): 200 garbage connections
 * to rank 0's store print a few warnings and one summary that counts the rest, not 200 lines,
 * and the job is unaffected (rendezvous/report_limiter.ts).
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, it } from 'node:test';
import { freePort } from '../helpers/world.js';
import { cleanEnv, cleanUp, kFailureJob, RingrunRun, tempDir } from './fixtures/ringrun_harness.js';

const dir = tempDir('ringrun-flood-');
after(() => cleanUp(dir));

function knock(port: number, junk: boolean): Promise<void> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    const timer = setTimeout(() => socket.destroy(), 2000);
    socket.on('error', () => {});
    socket.on('data', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      resolve();
    });
    socket.on('connect', () => (junk ? socket.end('GET / HTTP/1.1\r\n\r\n') : socket.end()));
  });
}

it('200 garbage connections to the store make a few warnings and a summary; the job goes on', { timeout: 30_000 }, async () => {
  const port = await freePort();
  const run = new RingrunRun(
    ['-np', '2', '--store-port', String(port), process.execPath, kFailureJob],
    cleanEnv({ DIR: dir, MODE: 'loop', ITERATIONS: '80', PAUSE_MS: '50' }),
  );
  await run.waitFor('the ranks in their loop', (r) => r.count('iteration 3') === 2);
  for (let i = 0; i < 200; i += 25) await Promise.all(Array.from({ length: 25 }, (_, j) => knock(port, (i + j) % 2 === 0)));
  const result = await run.finished;
  assert.equal(result.code, 0, result.stderr);
  assert.equal(run.count('done'), 2);
  const warnings = result.stderr.split('\n').filter((line) => /WARN: store: (refused|closed) a connection/.test(line));
  assert.ok(warnings.length <= 6, `${warnings.length} warning lines:\n${warnings.join('\n')}`);
  const counted = warnings.reduce((sum, line) => sum + 1 + Number(/\[and (\d+) more refused/.exec(line)?.[1] ?? 0), 0);
  assert.equal(counted, 200, warnings.join('\n'));
});
