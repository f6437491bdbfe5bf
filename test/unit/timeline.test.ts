/**
 * The timeline: every rank writes a valid Chrome trace JSON with the phases of each collective.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { TimelineFiles } from '../../src/launcher/timeline_files.js';
import { Timeline, timelinePathFor } from '../../src/observability/timeline.js';
import { allreduceRequest, startEngines, stopEngines } from '../helpers/engines.js';

interface TraceEvent {
  name: string;
  ph: string;
  pid: number;
  tid: number;
  ts?: number;
  dur?: number;
  args?: { name?: string };
}

test('timelinePathFor gives each rank its own file', () => {
  assert.equal(timelinePathFor('/t/trace.json', 1), '/t/trace.rank1.json');
  assert.equal(timelinePathFor('/t/trace', 2), '/t/trace.rank2');
  assert.equal(timelinePathFor('/t/{rank}/x.json', 3), '/t/3/x.json');
});

test('each rank writes the phases of its collectives as a Chrome trace', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ringreduce-timeline-'));
  try {
    const path = join(dir, 'trace.json');
    const ranks = startEngines(2, { timeline: path });
    await Promise.all(
      ranks.map((r, rank) => {
        const big = new Float32Array(new SharedArrayBuffer(1 << 20)).fill(rank);
        const small = Array.from({ length: 5 }, () => new Float32Array(new SharedArrayBuffer(64)).fill(rank));
        return Promise.all([
          r.submit(allreduceRequest('big', big.length), big),
          ...small.map((b, i) => r.submit(allreduceRequest(`small${i}`, b.length), b)),
        ]);
      }),
    );
    await stopEngines(ranks);
    for (const rank of [0, 1]) {
      const events = JSON.parse(readFileSync(timelinePathFor(path, rank), 'utf8')) as TraceEvent[];
      const phases = new Set(events.filter((e) => e.ph === 'X').map((e) => e.name));
      for (const phase of ['QUEUE', 'NEGOTIATE', 'WAIT', 'COMMUNICATE', 'REDUCE', 'FUSION_COPY']) {
        assert.ok(phases.has(phase), `rank ${rank} has ${phase} events (has ${[...phases]})`);
      }
      assert.ok(events.every((e) => e.pid === rank));
      const rows = events.filter((e) => e.ph === 'M' && e.name === 'thread_name').map((e) => e.args?.name);
      assert.ok(rows.includes('big') && rows.includes('small0'), 'one row per tensor');
      for (const e of events) if (e.ph === 'X') assert.ok((e.dur ?? -1) >= 0 && (e.ts ?? 0) > 0);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a timeline on a full disk (/dev/full) warns once, stops, and the collectives go on', async () => {
  const warnings: string[] = [];
  const full = new Timeline('/dev/full', 0, (message) => warnings.push(message));
  for (let i = 0; i < 5000; i++) full.span(`t${i % 7}`, 'COMMUNICATE', full.now(), 1);
  full.close();
  assert.equal(warnings.length, 1, warnings.join('\n'));
  assert.match(
    warnings[0] as string,
    /^cannot write the timeline \/dev\/full: ENOSPC: no space left on device, write; it stops here, the job goes on$/,
  );

  const dir = mkdtempSync(join(tmpdir(), 'ringreduce-timeline-full-'));
  try {
    for (const rank of [0, 1]) symlinkSync('/dev/full', join(dir, `trace.rank${rank}.json`));
    const ranks = startEngines(2, { timeline: join(dir, 'trace.json') });
    const done = await Promise.all(
      ranks.map((r, rank) => {
        const data = new Float32Array(new SharedArrayBuffer(4096)).fill(rank + 1);
        return r.submit(allreduceRequest('grad', data.length), data).then(() => data[0]);
      }),
    );
    assert.deepEqual(done, [3, 3]);
    await stopEngines(ranks);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('ringrun --timeline on a full disk (/dev/full) says once that it cannot write the trace', () => {
  const files = new TimelineFiles('/dev/full', process.cwd());
  const said: string[] = [];
  files.finish([0, 1], 2, [], (line) => said.push(line));
  assert.deepEqual(said, ['cannot write the timeline /dev/full: ENOSPC: no space left on device, write']);
});
