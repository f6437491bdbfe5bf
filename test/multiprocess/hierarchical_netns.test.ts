/**
 * Hierarchical allreduce and allgather across "hosts" with their own IP addresses (network
 * namespaces, fixtures/netns.ts), started over ringrun's ssh path: 2 hosts × 2 ranks and
 * 3 hosts × 2, each with RINGREDUCE_HIERARCHICAL_ALLREDUCE and _ALLGATHER off and on. Every rank
 * gets the right results either way, and rr.stats()'s bytes sent to other hosts show the flat ring
 * crossing hosts from one rank per host (2(N-1)/N·M for allreduce, (N-1)·b for allgather) and
 * the hierarchical algorithms from every rank with its 1/L share (2(H-1)/H·M/L, (H-1)·b): the
 * busiest rank sends at least L times less. Skips, saying why, where namespaces cannot be created.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createNet, type Net } from './fixtures/netns.js';
import { cleanEnv, cleanUp, RingrunRun, tempDir } from './fixtures/ringrun_harness.js';

const kJob = fileURLToPath(new URL('./fixtures/hierarchical_job.js', import.meta.url));
const kBytes = 4 << 20;
const dir = tempDir('ringrun-hier-netns-');
const net = createNet(3, dir);
after(() => {
  if ('destroy' in net) net.destroy();
  cleanUp(dir);
});

interface Report {
  rank: number;
  allreduceOk: boolean;
  allreduceCrossHost: number;
  allreduceMs: number;
  allgatherOk: boolean;
  allgatherCrossHost: number;
  allgatherMs: number;
}

/** Runs the job on `hosts` hosts of `local` ranks with the hierarchical algorithms `mode`; each rank's report. */
async function runJob(hosts: number, local: number, mode: 'on' | 'off'): Promise<Report[]> {
  const { hosts: addresses, ssh } = net as Net;
  const run = new RingrunRun(
    [
      '-H',
      addresses
        .slice(0, hosts)
        .map((a) => `${a}:${local}`)
        .join(','),
      '--ssh-command',
      ssh,
      '--network-interface',
      'eth0',
      process.execPath,
      kJob,
    ],
    cleanEnv({
      BYTES: String(kBytes),
      RINGREDUCE_HIERARCHICAL_ALLREDUCE: mode,
      RINGREDUCE_HIERARCHICAL_ALLGATHER: mode,
    }),
    60_000,
  );
  const result = await run.finished;
  assert.equal(result.code, 0, `${result.stdout}\n${result.stderr}`);
  const reports = result.stdout
    .split('\n')
    .map((line) => /^\[\d+\] (\{"rank".*\})$/.exec(line)?.[1])
    .filter((json): json is string => json !== undefined)
    .map((json) => JSON.parse(json) as Report)
    .sort((a, b) => a.rank - b.rank);
  assert.equal(reports.length, hosts * local, result.stdout);
  return reports;
}

/** Within a few bytes (blocks are whole elements). */
function assertNear(actual: number, expected: number, what: string): void {
  assert.ok(Math.abs(actual - expected) <= 16, `${what}: ${actual} bytes, expected about ${expected}`);
}

const mib = (b: number) => `${(b / 2 ** 20).toFixed(2)} MiB`;

describe('hierarchical collectives across network namespaces', { skip: 'skip' in net ? net.skip : false }, () => {
  // 3 hosts: the cross-host ring has more than 2 members (2 hosts × 2 ran here too; the unit
  // and conformance tests cover 2 × 2, and CI has 15 minutes).
  for (const [hosts, local] of [[3, 2]] as const) {
    const n = hosts * local;
    it(`${hosts} hosts × ${local}: right results either way, and the busiest rank sends L times less across hosts`, {
      timeout: 150_000,
    }, async (t) => {
      const off = await runJob(hosts, local, 'off');
      const on = await runJob(hosts, local, 'on');
      const block = Math.floor(kBytes / 4 / n) * 4;
      for (const [mode, reports] of [
        ['off', off],
        ['on', on],
      ] as const) {
        for (const r of reports) {
          assert.ok(r.allreduceOk, `${mode}: rank ${r.rank}'s allreduce`);
          assert.ok(r.allgatherOk, `${mode}: rank ${r.rank}'s allgather`);
          const boundary = r.rank % local === local - 1;
          if (mode === 'off') {
            assertNear(r.allreduceCrossHost, boundary ? (2 * (n - 1) * kBytes) / n : 0, `off: rank ${r.rank}'s allreduce`);
            assert.equal(r.allgatherCrossHost, boundary ? (n - 1) * block : 0, `off: rank ${r.rank}'s allgather`);
          } else {
            assertNear(r.allreduceCrossHost, (2 * (hosts - 1) * kBytes) / hosts / local, `on: rank ${r.rank}'s allreduce`);
            assert.equal(r.allgatherCrossHost, (hosts - 1) * block, `on: rank ${r.rank}'s allgather`);
          }
        }
      }
      const busiest = (reports: Report[], key: 'allreduceCrossHost' | 'allgatherCrossHost') =>
        Math.max(...reports.map((r) => r[key]));
      const total = (reports: Report[], key: 'allreduceCrossHost' | 'allgatherCrossHost') =>
        reports.reduce((s, r) => s + r[key], 0);
      for (const key of ['allreduceCrossHost', 'allgatherCrossHost'] as const) {
        assert.ok(busiest(off, key) >= local * busiest(on, key), `${key}: ${busiest(off, key)} against ${busiest(on, key)}`);
        const ms = (reports: Report[]) =>
          Math.max(...reports.map((r) => (key === 'allreduceCrossHost' ? r.allreduceMs : r.allgatherMs)));
        t.diagnostic(
          `${key.replace('CrossHost', '')} of ${mib(kBytes)}: busiest rank ${mib(busiest(off, key))} flat, ${mib(busiest(on, key))} hierarchical; ` +
            `all ranks ${mib(total(off, key))} flat, ${mib(total(on, key))} hierarchical; ` +
            `slowest rank ${ms(off).toFixed(1)} ms flat, ${ms(on).toFixed(1)} ms hierarchical`,
        );
      }
    });
  }
});
