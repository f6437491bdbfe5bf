/**
 * The dashboard's data model: a rank's state from its reports and from what the launcher says
 * (starting, running, idle, stalled by a long wait or by silence, failed, finished), its rates,
 * the events (warnings once each), the failure report, and the chart points.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { RankReport } from '../../src/engine/reporting/dashboard_reporter.js';
import { createStatsBuffer, readStats } from '../../src/engine/reporting/stats.js';
import { DashboardModel, kStalledAfterMs } from '../../src/launcher/dashboard/model.js';

function statsWith(values: Partial<ReturnType<typeof readStats>>): ReturnType<typeof readStats> {
  return { ...readStats(createStatsBuffer()), ...values };
}

function report(rank: number, t: number, extra: Partial<RankReport> = {}): RankReport {
  return {
    rank,
    size: 2,
    host: 'h',
    pid: 100 + rank,
    t,
    state: 'running',
    stats: statsWith({}),
    pending: [],
    lastError: undefined,
    warnings: [],
    training: undefined,
    timelineFile: undefined,
    ...extra,
  };
}

test('states, rates and events of a job from start to failure', () => {
  let now = 1_000_000;
  const model = new DashboardModel(2, 'node train.js', 'h', () => now);
  const states = () => model.state().ranks.map((r) => r.state);
  assert.deepEqual(states(), ['starting', 'starting']);
  model.launcherLine('rank 1 spawned, pid 4242');
  assert.equal(model.state().ranks[1]?.pid, 4242, 'the pid as the launcher says it, before any report');

  model.ingest(report(0, now, { stats: statsWith({ completed: 10, sentBytes: 1000, receivedBytes: 500 }) }));
  model.ingest(report(1, now, { state: 'idle' }));
  now += 1000;
  model.ingest(report(0, now, { stats: statsWith({ completed: 30, sentBytes: 5000, receivedBytes: 2500 }) }));
  const row = model.state().ranks[0];
  assert.equal(row?.state, 'running');
  assert.equal(row?.completed, 30);
  assert.equal(row?.collectivesPerSec, 20);
  assert.equal(row?.sentPerSec, 4000);
  assert.equal(row?.receivedPerSec, 2000);
  assert.equal(states()[1], 'idle');

  // A call pending for long: stalled. A rank silent for long: stalled.
  model.ingest(
    report(0, now, {
      stats: statsWith({ completed: 30, pending: 1 }),
      pending: [{ name: 'grad', op: 'allreduce', waitedMs: kStalledAfterMs + 1 }],
    }),
  );
  assert.equal(states()[0], 'stalled');
  assert.equal(model.state().ranks[0]?.pending[0]?.name, 'grad');
  now += kStalledAfterMs;
  assert.equal(states()[1], 'stalled', 'no report for a while');

  // A warning reported twice is one event; an error becomes the last error.
  const warning = { t: now, text: 'Stall: 1 tensor has waited 30000 ms for some ranks: rank 1 has not submitted grad' };
  model.ingest(report(0, now, { warnings: [warning] }));
  model.ingest(report(0, now, { warnings: [warning], lastError: { t: now, text: 'job broken: rank 1 failed' } }));
  const events = model.state().events;
  assert.equal(events.filter((e) => e.text.startsWith('Stall:')).length, 1);
  assert.equal(events.find((e) => e.level === 'error')?.text, 'job broken: rank 1 failed');
  assert.equal(model.state().ranks[0]?.lastError, 'job broken: rank 1 failed');

  // The launcher's exit line and failure report.
  model.launcherLine('rank 1 was killed by SIGKILL; stopping the other rank');
  model.launcherLine('job failed: rank 1 (pid 4242) was killed by SIGKILL');
  model.launcherLine('rank 1 printed nothing');
  model.ended(137);
  const end = model.state();
  assert.equal(end.ranks[1]?.state, 'failed');
  assert.equal(end.ranks[1]?.exit, 'was killed by SIGKILL');
  assert.deepEqual(end.failureReport, ['job failed: rank 1 (pid 4242) was killed by SIGKILL', 'rank 1 printed nothing']);
  assert.equal(end.job.exitCode, 137);
  assert.equal(end.ranks[0]?.state, 'finished', 'once the job is over, a rank that did not fail is done');
});

test('chart points: job rates from fresh reports, training metrics, and points after a time', () => {
  let now = 2_000_000;
  const model = new DashboardModel(2, 'x', 'h', () => now);
  for (let second = 0; second < 3; second++) {
    for (const rank of [0, 1]) {
      const training = { rank, epoch: 0, batch: second, samplesPerSecond: 100, logs: { loss: 1 / (second + 1), acc: 0.5 } };
      model.ingest(report(rank, now, { stats: statsWith({ completed: 50 * second, sentBytes: 1e6 * second }), training }));
    }
    model.sample();
    now += 1000;
  }
  const points = model.seriesSince(0);
  assert.equal(points.length, 3);
  const last = points[2];
  assert.equal(last?.collectivesPerSec, 50);
  assert.equal(last?.busBytesPerSec, 1e6);
  assert.deepEqual(last?.sentPerSec, [1e6, 1e6]);
  assert.equal(last?.loss, 1 / 3);
  assert.equal(last?.accuracy, 0.5);
  assert.equal(last?.samplesPerSec, 200, 'the ranks’ samples/s add up');
  assert.equal(model.seriesSince(points[1]?.t as number).length, 1);
  // A rank whose reports stopped counts for nothing in the job's rates.
  now += 10_000;
  model.sample();
  assert.equal(model.seriesSince(0).at(-1)?.collectivesPerSec, 0);
});

test("a failed rank's last error is the error the launcher read in its output", () => {
  const model = new DashboardModel(3, 'node train.js', 'h', () => 3_000_000);
  model.ingest(report(1, 3_000_000));
  model.launcherLine('error of rank 2: PeerFailureError: rank 1 (127.0.0.1:4000): closed the connection');
  model.launcherLine('rank 2 exited with code 1');
  model.launcherLine('rank 1 exited with code 1; stopping the other 2 ranks');
  model.launcherLine('job failed: rank 1 (pid 4242) exited with code 1');
  model.launcherLine('error of rank 1: Error: bad batch');
  model.launcherLine('last 2 lines of rank 1, up to its error:');
  model.launcherLine('  [1] Error: bad batch');
  model.launcherLine('  [1]     at file:///app/train.js:5:20');
  model.ended(1);
  const end = model.state();
  assert.equal(end.ranks[1]?.lastError, 'Error: bad batch');
  assert.equal(end.ranks[2]?.lastError, 'PeerFailureError: rank 1 (127.0.0.1:4000): closed the connection');
  assert.equal(end.ranks[2]?.state, 'failed');
  assert.equal(end.failureReport?.[0], 'job failed: rank 1 (pid 4242) exited with code 1');
  assert.equal(end.failureReport?.[1], 'error of rank 1: Error: bad batch');
});

test('a rank that exited with code 0 before calling init() failed', () => {
  const model = new DashboardModel(3, 'node train.js', 'h', () => 4_000_000);
  model.launcherLine('rank 2 exited with code 0 before calling init(); stopping the other 2 ranks');
  assert.equal(model.state().ranks[2]?.state, 'failed');
  assert.equal(model.state().ranks[2]?.exit, 'exited with code 0 before calling init()');
});

test('remote and browser ranks: their reports without a pid, their exits as the launcher words them', () => {
  const model = new DashboardModel(4, 'node train.js', 'h', () => 5_000_000);
  assert.equal(model.ingest(report(3, 5_000_000, { host: 'headless Chrome 156 on Linux', pid: null })), true);
  assert.equal(model.state().ranks[3]?.host, 'headless Chrome 156 on Linux');
  assert.equal(model.state().ranks[3]?.pid, null);
  model.launcherLine('rank 1 on node2 exited with code 0');
  model.launcherLine('rank 2 on node2 exited with code 3');
  model.launcherLine('rank 3 (headless Chrome 156 on Linux) closed its tab, or the browser crashed, before its program finished');
  const states = model.state().ranks.map((r) => r.state);
  assert.deepEqual(states.slice(1), ['finished', 'failed', 'failed']);
  assert.equal(
    model.state().ranks[3]?.exit,
    '(headless Chrome 156 on Linux) closed its tab, or the browser crashed, before its program finished',
  );
});
