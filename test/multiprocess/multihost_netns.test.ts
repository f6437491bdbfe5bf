/**
 * A job across three "hosts" with their own IP addresses (network namespaces, fixtures/netns.ts),
 * started over ringrun's ssh path: ranks are placed host by host, run allreduces over the
 * veth network, and when one host's link is cut in the middle of a collective (`ip link set
 * ... down`), the others detect it like a dead rank, naming it, and ringrun stops the job,
 * leaving no process behind. Skips, saying why, where namespaces cannot be created.
 */
import assert from 'node:assert/strict';
import { after, it } from 'node:test';
import { createNet, type Net } from './fixtures/netns.js';
import { assertNoneRunning, cleanEnv, cleanUp, failures, kFailureJob, RingrunRun, tempDir } from './fixtures/ringrun_harness.js';

const kIoTimeoutMs = 2000;
const dir = tempDir('ringrun-netns-');
const net = createNet(3, dir);
after(() => {
  if ('destroy' in net) net.destroy();
  cleanUp(dir);
});

interface Identity {
  rank: number;
  size: number;
  localRank: number;
  localSize: number;
  crossRank: number;
  crossSize: number;
}

it('runs across hosts on distinct addresses, and a cut link fails the job naming that rank', {
  timeout: 40_000,
  skip: 'skip' in net ? net.skip : false,
}, async (t) => {
  const { hosts, ssh, cut } = net as Net;
  const run = new RingrunRun(
    [
      '-H',
      `${hosts[0]}:2,${hosts[1]}:1,${hosts[2]}:1`,
      '--ssh-command',
      ssh,
      // Every namespace calls its interface eth0: each rank binds to and advertises its own address.
      '--network-interface',
      'eth0',
      '--io-timeout',
      `${kIoTimeoutMs}ms`,
      '--heartbeat',
      '400ms',
      process.execPath,
      kFailureJob,
    ],
    cleanEnv({ DIR: dir, MODE: 'loop' }),
  );
  await run.waitFor('every rank to be in the loop', (r) => r.count('iteration 3') === 4);
  const identities = run.stdout
    .split('\n')
    .map((line) => /^\[\d+\] (\{"rank".*\})$/.exec(line)?.[1])
    .filter((json): json is string => json !== undefined)
    .map((json) => JSON.parse(json) as Identity)
    .sort((a, b) => a.rank - b.rank);
  assert.deepEqual(
    identities.map((i) => [i.rank, i.size, i.localRank, i.localSize, i.crossRank, i.crossSize]),
    [
      [0, 4, 0, 2, 0, 3],
      [1, 4, 1, 2, 0, 3],
      [2, 4, 0, 1, 1, 3],
      [3, 4, 0, 1, 2, 3],
    ],
  );
  const cutAt = Date.now();
  cut(2); // the host of rank 3
  const result = await run.finished;

  assert.equal(result.code, 1, result.stderr);
  // The ranks that detected the cut exit within milliseconds of each other: some, or all of them,
  // may be gone when ringrun has read the first one's output, and then there is none to stop.
  assert.match(
    result.stderr,
    /ringrun: rank \d on 10\.[\d.]+ exited with code 1(?:; stopping the other (?:1 rank|[23] ranks))?\n/,
  );
  assert.match(
    result.stderr,
    /ringrun: job failed: rank \d \(pid \d+\) on 10\.[\d.]+ exited with code 1\nringrun: last \d+ lines/,
  );
  const seen = failures(result.stdout);
  const times: string[] = [];
  for (const rank of [0, 1, 2]) {
    const failure = seen.get(rank);
    assert.ok(failure, `rank ${rank} reported no failure\n${result.stdout}\n${result.stderr}`);
    assert.equal(failure.name, 'PeerFailureError', failure.message);
    assert.equal(failure.peerRank, 3, failure.message);
    const ms = failure.at - cutAt;
    times.push(`${ms} ms (rank ${rank})`);
    assert.ok(ms >= kIoTimeoutMs - 500 && ms < kIoTimeoutMs + 4000, `rank ${rank} detected the cut after ${ms} ms`);
  }
  t.diagnostic(`cut detected after ${times.join(', ')}`);
  assertNoneRunning(dir, 4);
});
