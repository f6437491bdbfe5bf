/**
 * Autotune (src/engine/tuning/): the search visits the grid and settles on the best score; on
 * in-process ranks, a loop of fused named allreduces stays correct while rank 0 changes the
 * fusion threshold trial by trial, every rank ends with the same settings, and the log holds a
 * line per trial. The score is injected (deterministic), so the test checks the search and the
 * agreement, never timing.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { RingReduce } from '../../src/api/runtime.js';
import { resolveConfig } from '../../src/core/config.js';
import { Logger } from '../../src/core/logger.js';
import { GridSearch } from '../../src/engine/tuning/grid_search.js';
import { gridOf, kBurstHoldGrid, kFusionThresholdGrid, type TunedSettings } from '../../src/engine/tuning/tuned_settings.js';
import { kAutotuneLogHeader, openAutotuneLog } from '../../src/observability/autotune_log.js';
import { createMemoryWorld } from '../../src/transport/memory/memory_transport.js';
import { LocalEngine } from '../helpers/local_engine.js';
import { testEnv } from '../helpers/test_env.js';

const kMiB = 1024 * 1024;
/** Best at 4 MiB and 1 ms; fusion off scores lowest. */
const score = (s: TunedSettings) =>
  s.fusionThresholdBytes === 0
    ? 1
    : 100 - 10 * Math.abs(Math.log2(s.fusionThresholdBytes / (4 * kMiB))) - Math.abs(s.burstHoldMs - 1);

describe('GridSearch', () => {
  it('visits every candidate, then the best three in turn twice, and settles on the best of those', () => {
    const start = { fusionThresholdBytes: 16 * kMiB, burstHoldMs: 2 };
    const candidates = gridOf(start);
    assert.equal(candidates.length, kFusionThresholdGrid.length * kBurstHoldGrid.length);
    assert.deepEqual(candidates[0], start);
    const search = new GridSearch(candidates, 3, 2);
    const tried: TunedSettings[] = [];
    for (let next = search.next(); next; next = search.next()) {
      tried.push(next);
      search.record(score(next));
    }
    assert.equal(tried.length, candidates.length + 6);
    const key = (s: TunedSettings) => `${s.fusionThresholdBytes}/${s.burstHoldMs}`;
    assert.deepEqual(new Set(tried.map(key)), new Set(candidates.map(key)));
    const finalists = [`${4 * kMiB}/1`, `${4 * kMiB}/0`, `${4 * kMiB}/2`];
    assert.deepEqual(tried.slice(-6).map(key), [...finalists, ...finalists]);
    assert.deepEqual(search.best()?.settings, { fusionThresholdBytes: 4 * kMiB, burstHoldMs: 1 });
    assert.equal(search.trials, tried.length);
  });

  it('lets only the final decide: a candidate lucky in the screening loses to a better one in the final', () => {
    const search = new GridSearch(gridOf({ fusionThresholdBytes: 16 * kMiB, burstHoldMs: 2 }), 3, 2);
    const lucky = (s: TunedSettings) => s.fusionThresholdBytes === 0 && s.burstHoldMs === 5;
    let screening = true;
    for (let next = search.next(); next; next = search.next()) {
      if (search.trials > kFusionThresholdGrid.length * kBurstHoldGrid.length) screening = false;
      search.record(lucky(next) ? (screening ? 1000 : 1) : score(next));
    }
    assert.deepEqual(search.best(), { settings: { fusionThresholdBytes: 4 * kMiB, burstHoldMs: 1 }, score: 100, samples: 2 });
  });

  it('adds configured settings that are off the grid as the first candidate', () => {
    const candidates = gridOf({ fusionThresholdBytes: 12345, burstHoldMs: 3 });
    assert.equal(candidates.length, kFusionThresholdGrid.length * kBurstHoldGrid.length + 1);
    assert.deepEqual(candidates[0], { fusionThresholdBytes: 12345, burstHoldMs: 3 });
  });
});

/** A LocalEngine that lets rr.stats() read its engine's counters. */
class CountedLocalEngine extends LocalEngine {
  get statsBuffer(): SharedArrayBuffer {
    return this.engine.stats.buffer;
  }
}

describe('autotune on in-process ranks', () => {
  it('keeps fused allreduces correct while the settings change, and every rank ends with the best', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ringreduce-autotune-'));
    const logPath = join(dir, 'autotune.csv');
    const size = 2;
    const world = createMemoryWorld(size, { delivery: 'macrotask' });
    const ranks = world.map((transport, rank) => {
      const config = resolveConfig({ rank, size, storeAddress: '127.0.0.1:1', logLevel: 'error', autotune: true }, testEnv());
      const logger = new Logger(`[rank ${rank}]`, config.logLevel);
      const log = rank === 0 ? openAutotuneLog(logPath, (message) => assert.fail(message)) : undefined;
      const options = {
        autotune: {
          startWarmupCollectives: 6,
          warmupCollectives: 6,
          sampleCollectives: 6,
          minSampleMs: 0,
          score,
          ...(log && { log }),
        },
      };
      return RingReduce.withEngine(config, new CountedLocalEngine(config, transport, logger, options));
    });
    try {
      // Six gradients of 1, 2 and 3 x 96 KiB a step (1.125 MiB): threshold 0 runs them one by one,
      // 1 MiB in groups, 4 MiB and more as one; a rank planning with another threshold would disagree.
      const elements = [1, 2, 3, 1, 2, 3].map((k) => (k * 96 * 1024) / 4);
      let steps = 0;
      while (!ranks.every((rr) => rr.stats().autotune?.done) && steps < 200) {
        const results = await Promise.all(
          ranks.map((rr, r) =>
            Promise.all(elements.map((n, g) => rr.allreduce(new Float32Array(n).fill(r + g + steps), { name: `grad${g}` }))),
          ),
        );
        for (const [r, outputs] of results.entries()) {
          for (const [g, out] of outputs.entries()) {
            const expected = size * (g + steps) + (size * (size - 1)) / 2;
            assert.equal(out[0], expected, `step ${steps}, rank ${r}, grad${g}`);
            assert.equal(out[out.length - 1], expected, `step ${steps}, rank ${r}, grad${g}`);
          }
        }
        steps++;
      }
      const states = ranks.map((rr) => rr.stats().autotune);
      const trials = kFusionThresholdGrid.length * kBurstHoldGrid.length + 6;
      for (const state of states) {
        assert.deepEqual(state, {
          done: true,
          trials,
          settings: { fusionThresholdBytes: 4 * kMiB, burstHoldMs: 1 },
          score: score({ fusionThresholdBytes: 4 * kMiB, burstHoldMs: 1 }),
        });
      }
      // The fused runs followed the settings: some steps ran unfused (threshold 0), most fused.
      const s = ranks[0]?.stats();
      assert.ok(s && s.executions < s.executed && s.executions > steps, `executions ${s?.executions} of ${s?.executed}`);
      const lines = readFileSync(logPath, 'utf8').trimEnd().split('\n');
      assert.equal(lines[0], kAutotuneLogHeader);
      assert.equal(lines.length, 1 + trials + 1);
      assert.match(lines.at(-1) as string, new RegExp(`^best,${4 * kMiB},1,`));
      assert.deepEqual(
        lines.slice(1, -1).map((line) => Number(line.split(',')[0])),
        Array.from({ length: trials }, (_, i) => i + 1),
      );
    } finally {
      await Promise.all(ranks.map((rr) => rr.shutdown()));
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
