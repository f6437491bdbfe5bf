/**
 * A program that ends without calling shutdown(): on Node its rank shuts down when the event
 * loop empties, as Horovod's exit hook does (platform/node, Platform.atProgramEnd), so a job
 * whose ranks all end together exits 0 with no error printed. A rank that ends while the others
 * still call collectives leaves them: a collective it never submits fails at once on the others
 * (coordinator.ts: a ShutdownError naming it), not after the shutdown deadline.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { cleanEnv, RingrunRun } from './fixtures/ringrun_harness.js';

const kJob = fileURLToPath(new URL('./fixtures/program_end_job.js', import.meta.url));

describe('a program that ends without shutdown()', { timeout: 120_000 }, () => {
  it('on every rank together: exit 0, nothing printed as an error (3 runs of 3 ranks)', async () => {
    for (let run = 0; run < 3; run++) {
      const result = await new RingrunRun(['-np', '3', process.execPath, kJob], cleanEnv({ MODE: 'together' }), 30_000).finished;
      assert.equal(result.code, 0, `run ${run}: ${result.stdout}\n${result.stderr}`);
      assert.equal((result.stdout.match(/SUM 3/g) ?? []).length, 3, result.stdout);
      assert.doesNotMatch(`${result.stdout}${result.stderr}`, /ERROR|job broken|closed the connection/, `run ${run}`);
    }
  });

  // The engine's sockets must not hold the process once no call is pending, or the loop never
  // empties and the rank never ends (platform/node/engine_in_thread.ts).
  it("with the engine on the caller's thread (RINGREDUCE_ENGINE_THREAD=0): exit 0 as well", async () => {
    const env = cleanEnv({ MODE: 'together', RINGREDUCE_ENGINE_THREAD: '0' });
    const result = await new RingrunRun(['-np', '3', process.execPath, kJob], env, 30_000).finished;
    assert.equal(result.code, 0, `${result.stdout}\n${result.stderr}`);
    assert.equal((result.stdout.match(/SUM 3/g) ?? []).length, 3, result.stdout);
    assert.doesNotMatch(`${result.stdout}${result.stderr}`, /ERROR|job broken|closed the connection/);
  });

  /** Runs MODE on 3 ranks: how ranks 0 and 1's collective ended, and how long the job took. */
  async function early(
    mode: string,
  ): Promise<{ seen: { name: string; error?: string; message?: string; peerRank?: number; ms: number }[]; took: number }> {
    const started = Date.now();
    const result = await new RingrunRun(['-np', '3', process.execPath, kJob], cleanEnv({ MODE: mode }), 30_000).finished;
    const took = Date.now() - started;
    assert.equal(result.code, 0, `${result.stdout}\n${result.stderr}`);
    const seen = [0, 1].map((rank) => {
      const line = new RegExp(`^\\[${rank}\\] (\\{"name".*\\})$`, 'm').exec(result.stdout)?.[1];
      assert.ok(line, `rank ${rank} says how its collective ended\n${result.stdout}`);
      return JSON.parse(line);
    });
    for (const { ms } of seen) assert.ok(ms < 5000, `known after ${ms} ms`);
    // Not after the 30 s shutdown deadline of the rank that left.
    assert.ok(took < 20_000, `the job took ${took} ms`);
    return { seen, took };
  }

  /**
   * Rank 0 fails a name the rank that left never submitted (a ShutdownError), and the rank that
   * left stops waiting for the others once one of them still sends it collective traffic (the
   * others then see it leave, or a write of theirs meet its closed socket): whichever comes
   * first names it.
   */
  function assertNamesTheRankThatLeft(seen: { name: string; error?: string; message?: string; peerRank?: number }): void {
    if (seen.error === 'ShutdownError') {
      assert.match(
        seen.message ?? '',
        new RegExp(
          `^rank 2 has shut down \\(its program ended, or it called shutdown\\(\\)\\): '${seen.name}' cannot complete without it$`,
        ),
      );
    } else if (seen.peerRank === 0) {
      // A rank that submits late (a loaded machine) finds rank 0 gone too: rank 0 failed the
      // collective without it, and its program then ended.
      assert.equal(seen.error, 'PeerFailureError', seen.message);
      assert.match(seen.message ?? '', /^rank 0 \(.*\) has shut down \(left the job\)/);
    } else {
      assert.equal(seen.error, 'PeerFailureError', seen.message);
      assert.equal(seen.peerRank, 2, seen.message);
      // Its goodbye, or a write that met its closed socket first ("write failed: EPIPE").
      assert.match(seen.message ?? '', /^rank 2 \(/);
    }
  }

  for (const [mode, what] of [
    ['early', 'a collective new to the job'],
    ['early-cached', 'a collective agreed in ready rounds'],
  ] as const) {
    it(`on one rank early: ${what} fails at once on the others, naming it`, async () => {
      for (const seen of (await early(mode)).seen) assertNamesTheRankThatLeft(seen);
    });
  }
});
