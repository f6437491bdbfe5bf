/**
 * The rendezvous store lost. A job that is not elastic meets at the store rank 0 hosts, and only
 * during start-up: ranks started by hand (as torchrun, Slurm or Kubernetes start them) wait in
 * init() for a peer that has not come, while rank 0's process dies (every waiting rank must say
 * that the store, at its address, closed the connection) or stops (it must say that the store has
 * not answered for the I/O timeout, not that the peer never came; a rank whose hello goes
 * unanswered: unit/tcp_store.test.ts). An elastic job meets at ringrun's store for its whole life: with
 * ringrun killed, every worker must end rather than hang: ringrun's guard stops it, or it names
 * the store. Prints the detection times.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { JobKey } from '../../src/rendezvous/auth.js';
import { meshKeyPrefix } from '../../src/rendezvous/mesh.js';
import { TcpStoreClient } from '../../src/rendezvous/tcp_store.js';
import { freePort } from '../helpers/world.js';
import { cleanEnv, cleanUp, kFailureJob, pidsIn, RingrunRun, running, tempDir } from './fixtures/ringrun_harness.js';

const kElasticJob = fileURLToPath(new URL('./fixtures/elastic_job.js', import.meta.url));
const kSecret = 'store-lost';
const kIoTimeoutMs = 1000;

interface Rank {
  child: ChildProcess;
  stderr: string;
  ended: Promise<{ code: number | null; at: number }>;
}

/** Rank `rank` of a job of 3 whose store is at `port`, started by hand. */
function startRank(rank: number, port: number, jobId: string, dir: string): Rank {
  const env = cleanEnv({
    RINGREDUCE_RANK: String(rank),
    RINGREDUCE_SIZE: '3',
    RINGREDUCE_STORE_ADDR: `127.0.0.1:${port}`,
    RINGREDUCE_JOB_ID: jobId,
    RINGREDUCE_SECRET: kSecret,
    RINGREDUCE_START_TIMEOUT_MS: '20000',
    RINGREDUCE_IO_TIMEOUT_MS: String(kIoTimeoutMs),
    DIR: dir,
    ITERATIONS: '1',
  });
  const child = spawn(process.execPath, [kFailureJob], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  const started: Rank = {
    child,
    stderr: '',
    ended: new Promise((resolve) => child.once('close', (code) => resolve({ code, at: performance.now() }))),
  };
  child.stderr?.setEncoding('utf8').on('data', (text: string) => (started.stderr += text));
  const limit = setTimeout(() => child.kill('SIGKILL'), 25_000);
  void started.ended.then(() => clearTimeout(limit));
  return started;
}

/** Resolves once `rank` has published its address in the store: from then on it waits for its peers'. */
async function published(port: number, jobId: string, rank: number): Promise<void> {
  const client = await TcpStoreClient.connect({
    host: '127.0.0.1',
    port,
    connectTimeoutMs: 15_000,
    key: new JobKey(kSecret),
  });
  try {
    await client.get(`${meshKeyPrefix(jobId)}addr/${rank}`, 15_000);
  } finally {
    await client.close();
  }
}

/** Ranks 0 and 1 of 3 in init(), waiting for rank 2, which has not come. */
async function waitingForRankTwo(jobId: string): Promise<{ port: number; ranks: Rank[]; dir: string }> {
  const port = await freePort();
  const dir = tempDir('ringreduce-store-lost-');
  const ranks = [startRank(0, port, jobId, dir), startRank(1, port, jobId, dir)];
  await published(port, jobId, 1);
  return { port, ranks, dir };
}

describe('the store lost', { timeout: 60_000, concurrency: true }, () => {
  const cleanups: (() => void)[] = [];
  after(() => {
    for (const cleanup of cleanups) cleanup();
  });

  it("during start-up, rank 0's process killed: the waiting rank names the store and its address at once", async () => {
    const { port, ranks, dir } = await waitingForRankTwo('store-killed');
    const [host, waiting] = ranks as [Rank, Rank];
    cleanups.push(() => cleanUp(dir));
    const killedAt = performance.now();
    host.child.kill('SIGKILL');
    const ended = await waiting.ended;
    const ms = Math.round(ended.at - killedAt);
    console.log(`# store's process killed: rank 1 failed ${ms} ms later`);
    assert.equal(ended.code, 1, waiting.stderr);
    assert.match(
      waiting.stderr,
      new RegExp(`the store at 127\\.0\\.0\\.1:${port} \\(rank 0 hosts it\\) (closed|broke) the connection`),
    );
    assert.ok(ms < 10_000, `${ms} ms`);
  });

  it("during start-up, rank 0's process stopped: the waiting rank says the store is silent, not that a peer is missing", async () => {
    const { port, ranks, dir } = await waitingForRankTwo('store-stopped');
    const [host, waiting] = ranks as [Rank, Rank];
    cleanups.push(() => {
      host.child.kill('SIGKILL');
      cleanUp(dir);
    });
    const stoppedAt = performance.now();
    host.child.kill('SIGSTOP');
    const ended = await waiting.ended;
    const ms = Math.round(ended.at - stoppedAt);
    console.log(`# store's process stopped: rank 1 failed ${ms} ms later`);
    assert.equal(ended.code, 1, waiting.stderr);
    assert.match(
      waiting.stderr,
      new RegExp(
        `the store at 127\\.0\\.0\\.1:${port} \\(rank 0 hosts it\\) has not answered for \\d+ ms: its process is stopped`,
      ),
    );
    assert.doesNotMatch(waiting.stderr, /did not call init/);
    assert.ok(ms < kIoTimeoutMs + 8000, `${ms} ms`);
    host.child.kill('SIGKILL');
  });

  it('of an elastic job, ringrun killed: every worker ends, stopped by its guard or naming the store', async () => {
    const dir = tempDir('ringreduce-store-lost-elastic-');
    cleanups.push(() => cleanUp(dir));
    const committed = join(dir, 'committed');
    const run = new RingrunRun(
      [
        '--elastic',
        '-np',
        '2',
        '--min-np',
        '2',
        'sh',
        '-c',
        `exec "${process.execPath}" "$0" 2>"${dir}/$RINGREDUCE_ELASTIC_WORKER.err"`,
        kElasticJob,
      ],
      cleanEnv({ STEPS: '100000', STEP_MS: '5', PID_DIR: dir, COMMITTED_FILE: committed }),
    );
    await run.waitFor('the first commit', () => existsSync(committed));
    const workers = pidsIn(dir);
    assert.equal(workers.length, 2);
    const killedAt = performance.now();
    run.child.kill('SIGKILL');
    while (workers.some(running)) {
      assert.ok(performance.now() - killedAt < 15_000, 'workers still running 15 s after ringrun was killed');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    console.log(`# elastic job, ringrun killed: its workers exited within ${Math.round(performance.now() - killedAt)} ms`);
    // The guard (orphan_guard.ts) stops them at once; a worker that saw the store close first says so.
    const { stderr } = await run.finished;
    for (const pid of workers) assert.match(stderr, new RegExp(`that started them is gone .*rank \\d \\(pid ${pid}\\)`));
    for (const worker of ['w0', 'w1']) {
      const said = readFileSync(join(dir, `${worker}.err`), 'utf8');
      if (said === '') continue;
      assert.match(
        said,
        /the store at [\d.]+:\d+ \(ringrun hosts it\) (closed the connection|broke the connection \([A-Z]+\)): ringrun ended/,
        said,
      );
    }
  });
});
