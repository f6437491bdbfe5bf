/**
 * ringrun's own tools: `--timeline FILE` writes one trace for all ranks (Perfetto's JSON: one
 * process row per rank), also when a rank fails; `--version`; `--check-build` says which
 * backends work and, for MPI, why not.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { kVersion } from '../../src/core/version.js';
import { mergeTimelineFiles } from '../../src/observability/timeline_merge.js';
import { cleanEnv, cleanUp, kFailureJob, RingrunRun, tempDir } from './fixtures/ringrun_harness.js';

const dir = tempDir('ringrun-tools-');
after(() => cleanUp(dir));

interface TraceEvent {
  name: string;
  ph: string;
  pid: number;
  args?: { name?: string };
}

function trace(path: string): TraceEvent[] {
  const parsed = JSON.parse(readFileSync(path, 'utf8')) as { traceEvents: TraceEvent[]; displayTimeUnit: string };
  assert.equal(parsed.displayTimeUnit, 'ms');
  return parsed.traceEvents;
}

describe('ringrun --timeline', { timeout: 40_000 }, () => {
  it('merges every rank into one trace, one process row per rank', async () => {
    const out = join(dir, 'trace.json');
    const result = await new RingrunRun(
      ['-np', '3', '--timeline', out, process.execPath, kFailureJob],
      cleanEnv({ DIR: dir, MODE: 'loop', ITERATIONS: '4' }),
    ).finished;
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, new RegExp(`ringrun: timeline of 3 of 3 ranks written to ${out} \\(\\d+ events`));
    const events = trace(out);
    const rows = events.filter((e) => e.name === 'process_name').map((e) => [e.pid, e.args?.name]);
    assert.deepEqual(rows.sort(), [
      [0, 'rank 0'],
      [1, 'rank 1'],
      [2, 'rank 2'],
    ]);
    for (const rank of [0, 1, 2]) {
      assert.ok(
        events.some((e) => e.pid === rank && e.name === 'COMMUNICATE'),
        `rank ${rank} has no COMMUNICATE event`,
      );
    }
  });

  it('still writes the trace when a rank fails, from what each rank had written', async () => {
    // A rank that exits without shutdown() leaves its file without its closing bracket and
    // without its last unflushed events (timeline.ts flushes every 4096): fail late enough
    // that both ranks have flushed some.
    const out = join(dir, 'failed.json');
    const result = await new RingrunRun(
      ['-np', '2', '--timeline', out, process.execPath, kFailureJob],
      cleanEnv({ DIR: dir, MODE: 'loop', FAIL_RANK: '1', FAIL_AT: '1500' }),
    ).finished;
    assert.equal(result.code, 3, result.stderr);
    assert.ok(existsSync(out), result.stderr);
    const events = trace(out);
    assert.deepEqual([...new Set(events.map((e) => e.pid))].sort(), [0, 1]);
    assert.ok(events.filter((e) => e.name === 'COMMUNICATE').length > 1000, `${events.length} events`);
  });

  it('reads a rank file cut short (its process killed before closing it)', () => {
    const cut = join(dir, 'cut.rank0.json');
    const whole = join(dir, 'whole.rank1.json');
    writeFileSync(
      cut,
      '[\n{"name":"process_name","ph":"M","pid":0,"tid":0},\n{"name":"QUEUE","ph":"X","pid":0,"tid":1,"ts":1,"dur":2}',
    );
    writeFileSync(whole, '[\n{"name":"process_name","ph":"M","pid":1,"tid":0}\n]\n');
    const result = mergeTimelineFiles([cut, whole, join(dir, 'none.json')], join(dir, 'merged.json'));
    assert.deepEqual([result.events, result.missing.length, result.unreadable], [3, 1, []]);
  });
});

describe('ringrun --version and --check-build', { timeout: 20_000 }, () => {
  it('--version prints the package version', async () => {
    const result = await new RingrunRun(['--version'], cleanEnv()).finished;
    assert.equal(result.code, 0);
    assert.equal(result.stdout, `ringrun ${kVersion} (ringreduce, Node ${process.version})\n`);
  });

  it('--check-build names every backend and says whether the MPI addon loads', async () => {
    const result = await new RingrunRun(['--check-build'], cleanEnv()).finished;
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /^ {2}tcp {3}available/m);
    assert.match(result.stdout, /^ {2}solo {2}available/m);
    assert.match(result.stdout, /^ {2}mpi {3}(available: the MPI addon is built and loads|not available: .*)/m);
    assert.match(result.stdout, /^mpirun: /m);
  });
});
