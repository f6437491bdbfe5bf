/**
 * examples/deploy/ringreduce.sbatch, run whole: Slurm is not here, so a stand-in `srun` (first
 * on PATH) starts its tasks, one per "node", on this machine with the variables srun gives a
 * step of 2 nodes x 1 task (SLURM_NODEID, SLURM_NNODES, SLURM_STEP_ID, the node list...). The
 * two ringruns derive the endpoint from them, meet, and run a job of 2 x 2 ranks; a rank that
 * fails fails the script with its code.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { assertNoneRunning, cleanEnv, cleanUp, kBin, kFailureJob, tempDir } from './fixtures/ringrun_harness.js';

const kScript = fileURLToPath(new URL('../../../examples/deploy/ringreduce.sbatch', import.meta.url));
const dirs: string[] = [];
after(() => {
  for (const d of dirs) cleanUp(d);
});

/** A stand-in for srun: its options are ignored; the command runs once per node, in parallel. */
const kFakeSrun = `#!/bin/bash
while [[ "$1" == -* ]]; do shift; done
pids=()
for ((i = 0; i < FAKE_NODES; i++)); do
  SLURM_JOB_ID=$FAKE_JOB_ID SLURM_JOBID=$FAKE_JOB_ID SLURM_STEP_ID=0 SLURM_STEPID=0 \\
  SLURM_NODEID=$i SLURM_PROCID=$i SLURM_LOCALID=0 SLURM_NNODES=$FAKE_NODES SLURM_STEP_NUM_NODES=$FAKE_NODES \\
  SLURM_NTASKS=$FAKE_NODES SLURM_NTASKS_PER_NODE=1 SLURM_TASKS_PER_NODE="1(x$FAKE_NODES)" \\
  SLURM_JOB_NODELIST=127.0.0.1 SLURM_STEP_NODELIST=127.0.0.1 \\
    "$@" > "$FAKE_OUT.$i" 2>&1 &
  pids+=($!)
done
rc=0
for pid in "\${pids[@]}"; do wait "$pid" || rc=$?; done
exit $rc
`;

async function sbatch(env: Record<string, string>): Promise<{ code: number | null; outputs: string[] }> {
  const dir = tempDir('ringrun-sbatch-');
  dirs.push(dir);
  const bin = join(dir, 'bin');
  mkdirSync(bin);
  writeFileSync(join(bin, 'srun'), kFakeSrun);
  chmodSync(join(bin, 'srun'), 0o755);
  const out = join(dir, 'task');
  const child = spawn('bash', [kScript], {
    cwd: dir,
    env: cleanEnv({
      PATH: `${bin}:${process.env.PATH ?? ''}`,
      FAKE_NODES: '2',
      FAKE_JOB_ID: String(100 + (process.pid % 900)),
      FAKE_OUT: out,
      RINGRUN: kBin,
      NPROC_PER_NODE: '2',
      TRAIN_SCRIPT: kFailureJob,
      DIR: dir,
      MODE: 'loop',
      ...env,
    }),
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const limit = setTimeout(() => child.kill('SIGKILL'), 40_000);
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  clearTimeout(limit);
  const outputs = [0, 1].map((i) => readFileSync(`${out}.${i}`, 'utf8'));
  assertNoneRunning(dir, 4);
  return { code, outputs };
}

describe('ringreduce.sbatch with a stand-in srun', { timeout: 90_000 }, () => {
  it('two ringruns meet through the endpoint from Slurm and run 2 x 2 ranks', { timeout: 45_000 }, async () => {
    const { code, outputs } = await sbatch({ ITERATIONS: '3' });
    assert.equal(code, 0, outputs.join('\n----\n'));
    const ranks = outputs
      .join('\n')
      .split('\n')
      .map((line) => /^\[\d\] (\{"rank".*\})$/.exec(line)?.[1])
      .filter((json): json is string => json !== undefined)
      .map((json) => JSON.parse(json) as Record<string, number>)
      .map((i) => [i.rank, i.localRank, i.localSize, i.crossRank, i.crossSize])
      .sort((a, b) => (a[0] ?? 0) - (b[0] ?? 0));
    assert.deepEqual(ranks, [
      [0, 0, 2, 0, 2],
      [1, 1, 2, 0, 2],
      [2, 0, 2, 1, 2],
      [3, 1, 2, 1, 2],
    ]);
  });

  it('a rank that fails fails the script, with its code, on both nodes', { timeout: 45_000 }, async () => {
    const { code, outputs } = await sbatch({ FAIL_RANK: '2', FAIL_AT: '3', FAIL_CODE: '5' });
    assert.equal(code, 5, outputs.join('\n----\n'));
    for (const output of outputs) assert.match(output, /ringrun: job failed: rank 2 \(pid \d+\) on node 1 /);
  });
});
