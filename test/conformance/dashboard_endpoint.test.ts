/**
 * The dashboard's server without a browser: malformed requests, wrong tokens, oversized bodies,
 * garbage bytes, many clients and clients that never read leave it serving; and a job whose
 * dashboard is dead, a black hole, or flooded by such clients runs its collectives and shuts down
 * as fast as ever (the ranks never wait for their reports).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { type AddressInfo, connect, createServer, type Socket } from 'node:net';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { RingReduce } from '../../src/api/runtime.js';
import type { RankReport } from '../../src/engine/reporting/dashboard_reporter.js';
import { DashboardModel } from '../../src/launcher/dashboard/model.js';
import { DashboardServer } from '../../src/launcher/dashboard/server.js';
import { ingestUrl, kDashboardEnv } from '../../src/observability/dashboard_target.js';
import { startWorld, stopWorld } from '../helpers/world.js';

const kView = 'v'.repeat(32);
const kIngest = 'i'.repeat(32);

function report(rank: number, extra: Partial<RankReport> = {}): RankReport {
  return {
    rank,
    size: 3,
    host: hostname(),
    pid: 1000 + rank,
    t: Date.now(),
    state: 'running',
    stats: undefined,
    pending: [],
    lastError: undefined,
    warnings: [],
    training: undefined,
    timelineFile: undefined,
    ...extra,
  };
}

async function request(port: number, path: string, init: RequestInit = {}): Promise<{ status: number; text: string }> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, { ...init, signal: AbortSignal.timeout(5000) });
  return { status: response.status, text: await response.text() };
}

/** Raw bytes to the server; resolves with what it answered (or '' when it just closed). */
function raw(port: number, bytes: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => socket.end(bytes));
    let answer = '';
    socket.setEncoding('utf8').on('data', (text: string) => {
      answer += text;
    });
    socket.on('error', () => resolve(answer));
    socket.on('close', () => resolve(answer));
  });
}

describe('the data endpoint', () => {
  let server: DashboardServer;
  let model: DashboardModel;
  let port = 0;
  before(async () => {
    model = new DashboardModel(3, 'node train.js', hostname());
    server = await DashboardServer.start({ host: '127.0.0.1', port: 0, model, viewToken: kView, ingestToken: kIngest });
    port = server.port;
  });
  after(() => server.close());

  test('the state needs the view token; reports need the ingest token', async () => {
    assert.equal((await request(port, '/api/state')).status, 403);
    assert.equal((await request(port, `/api/state?token=${kIngest}`)).status, 403);
    assert.equal((await request(port, `/api/state?token=${kView}x`)).status, 403);
    assert.equal((await request(port, '/')).status, 403);
    const ok = await request(port, `/api/state?token=${kView}`);
    assert.equal(ok.status, 200);
    assert.equal(JSON.parse(ok.text).state.ranks.length, 3);
    const post = (token: string, body: string) => request(port, `/ingest/${token}`, { method: 'POST', body });
    assert.equal((await post(kView, JSON.stringify(report(0)))).status, 403, 'a viewer cannot feed the page');
    assert.equal((await post(kIngest, JSON.stringify(report(0)))).status, 204);
    // The page's copy is at most 500 ms old (it is serialised at most twice a second).
    await new Promise((resolve) => setTimeout(resolve, 600));
    const state = JSON.parse((await request(port, `/api/state?token=${kView}`)).text).state;
    assert.equal(state.ranks[0].pid, 1000);
  });

  test('malformed requests are refused and change nothing', async () => {
    const version = model.version;
    const post = (body: string) => request(port, `/ingest/${kIngest}`, { method: 'POST', body });
    assert.equal((await post('{not json')).status, 400);
    assert.equal((await post('[]')).status, 400);
    assert.equal((await post(JSON.stringify({ ...report(1), rank: 7 }))).status, 400, 'a rank outside the job');
    assert.equal((await post(JSON.stringify({ ...report(1), rank: -1 }))).status, 400);
    assert.equal((await post(JSON.stringify({ ...report(1), state: 'hacked' }))).status, 400);
    assert.equal((await post('x'.repeat(300 * 1024)).catch(() => ({ status: 413 }))).status, 413, 'a body over the cap');
    assert.equal((await request(port, `/api/state?token=${kView}`, { method: 'POST', body: 'x' })).status, 405, 'read-only');
    assert.equal((await request(port, `/api/state?token=${kView}`, { method: 'DELETE' })).status, 405);
    assert.equal((await request(port, '/assets/../../package.json')).status, 404);
    assert.equal((await request(port, '/assets/server.js')).status, 404, 'only the page files are served');
    assert.equal((await request(port, `/api/timeline?token=${kView}`)).status, 404, 'no rank writes a timeline');
    assert.match(await raw(port, 'GARBAGE\r\n\r\n'), /^$|400/);
    assert.match(await raw(port, `GET /api/state?token=${kView} HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n`), /^$|400/);
    assert.equal(model.version, version, 'the model did not change');
    assert.equal((await request(port, `/api/state?token=${kView}`)).status, 200, 'still serving');
  });

  test('many clients at once, and clients that never read: the server goes on serving', async () => {
    // More clients than it keeps connections for: some are turned away, none is stuck.
    const many = await Promise.allSettled(
      Array.from({ length: 200 }, () => request(port, `/api/state?token=${kView}`).then((r) => r.status)),
    );
    const served = many.filter((m) => m.status === 'fulfilled' && m.value === 200).length;
    assert.ok(served >= 100, `${served} of 200 served`);
    // Clients that ask for the state again and again and never read the answers.
    const stuck: Socket[] = [];
    const pipelined = `GET /api/state?token=${kView} HTTP/1.1\r\nHost: x\r\n\r\n`.repeat(200);
    for (let i = 0; i < 20; i++) {
      const socket = connect(port, '127.0.0.1', () => socket.write(pipelined));
      socket.on('error', () => {});
      socket.pause();
      stuck.push(socket);
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
    const started = performance.now();
    for (let i = 0; i < 5; i++) {
      assert.equal((await request(port, `/ingest/${kIngest}`, { method: 'POST', body: JSON.stringify(report(2)) })).status, 204);
      assert.equal((await request(port, `/api/state?token=${kView}`)).status, 200);
    }
    const ms = performance.now() - started;
    assert.ok(ms < 2000, `10 requests beside 20 stuck clients took ${ms.toFixed(0)} ms`);
    for (const socket of stuck) socket.destroy();
  });
});

/** Runs `steps` named allreduces on every rank; the time they took. */
async function steps(world: readonly RingReduce[], count: number): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < count; i++) {
    await Promise.all(world.map((rr) => rr.allreduce(new Float32Array(4096).fill(1), { name: 'grad' })));
  }
  return performance.now() - started;
}

/** A job of 3 ranks in this process reporting to `url` (or to nothing): its steps' time, and its shutdown's. */
async function jobReportingTo(url: string | undefined, count: number): Promise<{ stepsMs: number; shutdownMs: number }> {
  if (url === undefined) delete process.env[kDashboardEnv];
  else process.env[kDashboardEnv] = url;
  let world: RingReduce[] = [];
  try {
    world = await startWorld(3);
  } finally {
    delete process.env[kDashboardEnv];
  }
  const stepsMs = await steps(world, count);
  const started = performance.now();
  await stopWorld(world);
  return { stepsMs, shutdownMs: performance.now() - started };
}

describe('what the ranks report', () => {
  test('stall warnings, pending calls and their waits reach the page as they happen', { timeout: 30_000 }, async () => {
    const model = new DashboardModel(2, 'test', hostname());
    const server = await DashboardServer.start({ host: '127.0.0.1', port: 0, model, viewToken: kView, ingestToken: kIngest });
    process.env[kDashboardEnv] = ingestUrl('127.0.0.1', server.port, kIngest);
    let world: RingReduce[] = [];
    try {
      world = await startWorld(2, { logLevel: 'warn', stallWarningMs: 300, stallTimeoutMs: 0 });
    } finally {
      delete process.env[kDashboardEnv];
    }
    try {
      // Rank 0 submits, rank 1 does not (yet): rank 0's stall inspector warns, naming rank 1.
      const late = world[0]?.allreduce(new Float32Array(4), { name: 'late' });
      const deadline = Date.now() + 10_000;
      const seen = () =>
        model.state().events.some((e) => e.level === 'warning' && /Stall:.*rank 1 has not submitted 'late'/.test(e.text));
      while (!seen() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
      assert.ok(seen(), `a stall warning event: ${JSON.stringify(model.state().events)}`);
      const row = model.state().ranks[0];
      assert.equal(row?.pending[0]?.name, 'late');
      assert.ok((row?.pending[0]?.waitedMs ?? 0) >= 300, 'with how long it has waited');
      assert.equal(row?.pendingCount, 1);
      await Promise.all([late, world[1]?.allreduce(new Float32Array(4), { name: 'late' })]);
    } finally {
      await stopWorld(world);
      await server.close();
    }
  });
});

describe('the timeline download', () => {
  test("the ranks' timeline files, merged: one process row per rank", { timeout: 30_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ringreduce-dashboard-timeline-'));
    const model = new DashboardModel(2, 'test', hostname());
    const server = await DashboardServer.start({ host: '127.0.0.1', port: 0, model, viewToken: kView, ingestToken: kIngest });
    process.env[kDashboardEnv] = ingestUrl('127.0.0.1', server.port, kIngest);
    let world: RingReduce[] = [];
    try {
      world = await startWorld(2, { timeline: join(dir, 'trace.json') });
    } finally {
      delete process.env[kDashboardEnv];
    }
    try {
      await steps(world, 20);
      // The engines flush their traces in batches and at shutdown; the reports said where they are.
      await stopWorld(world);
      assert.equal(model.state().job.timeline, true);
      const response = await request(server.port, `/api/timeline?token=${kView}`);
      assert.equal(response.status, 200);
      const trace = JSON.parse(response.text) as { traceEvents: { pid: number; ph: string; name: string }[] };
      assert.deepEqual([...new Set(trace.traceEvents.map((e) => e.pid))].sort(), [0, 1]);
      assert.ok(trace.traceEvents.some((e) => e.ph === 'X' && e.name === 'COMMUNICATE'));
      assert.equal((await request(server.port, '/api/timeline?token=wrong')).status, 403);
    } finally {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('a job watched by a dead, a black-hole or a flooded dashboard', () => {
  test('runs and shuts down as without one', { timeout: 60_000 }, async (t) => {
    // Long enough for several reports, and for a report to the black hole to time out (2 s).
    const kSteps = 1200;
    // Nothing listens on a port just released.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const deadPort = (probe.address() as AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    // Accepts connections, never reads, never answers.
    const held: Socket[] = [];
    const hole = createServer((socket) => {
      socket.pause();
      held.push(socket);
    });
    await new Promise<void>((resolve) => hole.listen(0, '127.0.0.1', resolve));
    const holePort = (hole.address() as AddressInfo).port;
    // The real server, with clients that never read.
    const model = new DashboardModel(3, 'test', hostname());
    const server = await DashboardServer.start({ host: '127.0.0.1', port: 0, model, viewToken: kView, ingestToken: kIngest });
    const stuck: Socket[] = [];
    for (let i = 0; i < 20; i++) {
      const socket = connect(server.port, '127.0.0.1', () =>
        socket.write(`GET /api/state?token=${kView} HTTP/1.1\r\nHost: x\r\n\r\n`.repeat(100)),
      );
      socket.on('error', () => {});
      socket.pause();
      stuck.push(socket);
    }
    try {
      const plain = await jobReportingTo(undefined, kSteps);
      const dead = await jobReportingTo(ingestUrl('127.0.0.1', deadPort, kIngest), kSteps);
      const blackHole = await jobReportingTo(ingestUrl('127.0.0.1', holePort, kIngest), kSteps);
      const flooded = await jobReportingTo(ingestUrl('127.0.0.1', server.port, kIngest), kSteps);
      const runs = { plain, dead, blackHole, flooded };
      t.diagnostic(
        Object.entries(runs)
          .map(([name, r]) => `${name}: ${kSteps} steps ${r.stepsMs.toFixed(0)} ms, shutdown ${r.shutdownMs.toFixed(0)} ms`)
          .join('; '),
      );
      assert.ok(held.length >= 3, `the ranks did try the black hole (${held.length} connections)`);
      assert.ok(
        model.state().ranks.every((r) => r.pid === process.pid),
        "the flooded server still took every rank's reports",
      );
      for (const [name, r] of Object.entries(runs)) {
        // A report never waits: no run is held up by its dashboard (generous bounds: the machine is shared).
        assert.ok(
          r.stepsMs < plain.stepsMs * 3 + 2000,
          `${name}: ${r.stepsMs.toFixed(0)} ms against ${plain.stepsMs.toFixed(0)}`,
        );
        assert.ok(r.shutdownMs < plain.shutdownMs + 1500, `${name}: shutdown ${r.shutdownMs.toFixed(0)} ms`);
      }
    } finally {
      for (const socket of [...held, ...stuck]) socket.destroy();
      hole.close();
      await server.close();
    }
  });
});
