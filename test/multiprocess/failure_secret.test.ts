/**
 * The job secret: while a job runs, connections to its store without the secret, with a
 * wrong one, or with garbage are refused and logged by rank 0, and the job completes. The
 * secret never appears on a command line or in ringrun's output.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { after, it } from 'node:test';
import { ProtocolError } from '../../src/core/errors.js';
import { JobKey } from '../../src/rendezvous/auth.js';
import { TcpStoreClient } from '../../src/rendezvous/tcp_store.js';
import { assertNoneRunning, cleanEnv, cleanUp, kFailureJob, pidsIn, RingrunRun, tempDir } from './fixtures/ringrun_harness.js';

const dir = tempDir('ringrun-secret-');
after(() => cleanUp(dir));

/** The command lines of every process (what `ps` shows to any user). */
function allCommandLines(): string[] {
  const lines: string[] = [];
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      lines.push(readFileSync(`/proc/${pid}/cmdline`, 'utf8'));
    } catch {}
  }
  return lines;
}

it('refuses and logs strangers at the store while the job completes', { timeout: 30_000 }, async () => {
  const run = new RingrunRun(
    ['-np', '2', '--verbose', process.execPath, kFailureJob],
    cleanEnv({ DIR: dir, MODE: 'loop', ITERATIONS: '20', PAUSE_MS: '80' }),
  );
  await run.waitFor('the job to run', (r) => r.count('iteration 1') === 2);
  const match = /store at (127\.0\.0\.1):(\d+)/.exec(run.stderr);
  assert.ok(match, run.stderr);
  const address = { host: match[1] as string, port: Number(match[2]) };

  for (const key of [new JobKey('a guess'), new JobKey(undefined)]) {
    await assert.rejects(
      TcpStoreClient.connect({ ...address, connectTimeoutMs: 2000, key }),
      (e) => e instanceof ProtocolError && /could not prove it knows the job secret/.test(e.message),
    );
  }
  await new Promise<void>((resolve) => {
    const socket = net.connect(address.port, address.host);
    socket.on('error', () => {});
    socket.on('data', () => {});
    socket.on('close', () => resolve());
    socket.end(Buffer.alloc(40, 0x42));
  });
  // Meanwhile nobody's command line carries the secret.
  const secrets = pidsIn(dir).map(
    (pid) => /RINGREDUCE_SECRET=([0-9a-f]+)/.exec(readFileSync(`/proc/${pid}/environ`, 'utf8').replaceAll('\0', '\n'))?.[1],
  );
  assert.ok(secrets.length === 2 && secrets[0] !== undefined && secrets[0] === secrets[1], 'the ranks share one secret');
  assert.ok(!allCommandLines().some((line) => line.includes(secrets[0] as string)), 'a command line shows the secret');

  const result = await run.finished;
  assert.equal(result.code, 0, result.stderr);
  assert.equal(run.count('done'), 2);
  const refusals = result.stderr
    .split('\n')
    .filter((line) => /^\[0\] ringreduce \[rank 0\] WARN: store: (refused|closed) a connection from 127\.0\.0\.1:\d+/.test(line));
  assert.equal(refusals.length, 3, result.stderr);
  assert.equal(refusals.filter((line) => /before authenticating/.test(line)).length, 2, refusals.join('\n'));
  assert.equal(refusals.filter((line) => /bad store frame magic/.test(line)).length, 1, refusals.join('\n'));
  assert.ok(
    !result.stderr.includes(secrets[0] as string) && !result.stdout.includes(secrets[0] as string),
    'the secret was printed',
  );
  assertNoneRunning(dir, 2);
});
