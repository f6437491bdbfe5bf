/**
 * The timeline: every rank writes a valid Chrome trace JSON with the phases of each collective.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { timelinePathFor } from '../../src/observability/timeline.js';
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
