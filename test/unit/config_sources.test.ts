/**
 * Where rank, size, local and cross values and the store address come from when a launcher
 * other than ringrun starts the ranks (core/config.ts): Slurm's variables as srun sets them,
 * torchrun's (with its agent's store on MASTER_PORT), and variables left over in an
 * environment, which a process must name when they make it join a job.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { resolveConfig } from '../../src/core/config.js';
import { InvalidArgumentError } from '../../src/core/errors.js';
import { expandSlurmHostlist, parseSlurmTasksPerNode, slurmRendezvous } from '../../src/core/slurm.js';

/**
 * The environment srun gives task `procid` of a step with `tasksPerNode` (Slurm's form) on
 * the nodes of `nodelist`, block distribution. `ntasksPerNode` is set only with --ntasks-per-node.
 */
function slurmTask(
  procid: number,
  step: { nodelist: string; tasksPerNode: string; ntasksPerNode?: number; jobId?: number },
): Record<string, string> {
  const perNode = parseSlurmTasksPerNode(step.tasksPerNode);
  const ntasks = perNode.reduce((a, b) => a + b, 0);
  let node = 0;
  let first = 0;
  while (procid >= first + (perNode[node] ?? 0)) first += perNode[node++] ?? 0;
  const env: Record<string, string> = {
    SLURM_JOB_ID: String(step.jobId ?? 4242),
    SLURM_JOBID: String(step.jobId ?? 4242),
    SLURM_STEP_ID: '0',
    SLURM_STEPID: '0',
    SLURM_PROCID: String(procid),
    SLURM_LOCALID: String(procid - first),
    SLURM_NODEID: String(node),
    SLURM_NTASKS: String(ntasks),
    SLURM_NPROCS: String(ntasks),
    SLURM_NNODES: String(perNode.length),
    SLURM_JOB_NUM_NODES: String(perNode.length),
    SLURM_STEP_NUM_NODES: String(perNode.length),
    SLURM_STEP_NUM_TASKS: String(ntasks),
    SLURM_TASKS_PER_NODE: step.tasksPerNode,
    SLURM_STEP_TASKS_PER_NODE: step.tasksPerNode,
    SLURM_JOB_NODELIST: step.nodelist,
    SLURM_NODELIST: step.nodelist,
    SLURM_STEP_NODELIST: step.nodelist,
  };
  if (step.ntasksPerNode !== undefined) env.SLURM_NTASKS_PER_NODE = String(step.ntasksPerNode);
  return env;
}

function placements(env: (procid: number) => Record<string, string>, count: number): number[][] {
  return Array.from({ length: count }, (_, procid) => {
    const c = resolveConfig({}, env(procid));
    return [c.rank, c.size, c.localRank, c.localSize, c.crossRank, c.crossSize];
  });
}

describe('Slurm', () => {
  it('2 nodes x 2 tasks with --ntasks-per-node: local and cross values, store on the first node', () => {
    const step = { nodelist: 'gpu[07-08]', tasksPerNode: '2(x2)', ntasksPerNode: 2 };
    assert.deepEqual(
      placements((p) => slurmTask(p, step), 4),
      [
        [0, 4, 0, 2, 0, 2],
        [1, 4, 1, 2, 0, 2],
        [2, 4, 0, 2, 1, 2],
        [3, 4, 1, 2, 1, 2],
      ],
    );
    const c = resolveConfig({}, slurmTask(3, step));
    assert.equal(c.storeHost, 'gpu07');
    assert.equal(c.storePort, slurmRendezvous(slurmTask(0, step))?.port);
  });

  it('2 nodes x 2 tasks without --ntasks-per-node (SLURM_TASKS_PER_NODE only)', () => {
    const step = { nodelist: 'node[01-02]', tasksPerNode: '2(x2)' };
    assert.deepEqual(
      placements((p) => slurmTask(p, step), 4),
      [
        [0, 4, 0, 2, 0, 2],
        [1, 4, 1, 2, 0, 2],
        [2, 4, 0, 2, 1, 2],
        [3, 4, 1, 2, 1, 2],
      ],
    );
  });

  it('2 nodes x 1 task, and uneven nodes ("3,2")', () => {
    const one = { nodelist: 'a1,b1', tasksPerNode: '1(x2)' };
    assert.deepEqual(
      placements((p) => slurmTask(p, one), 2),
      [
        [0, 2, 0, 1, 0, 2],
        [1, 2, 0, 1, 1, 2],
      ],
    );
    const uneven = { nodelist: 'n[1-2]', tasksPerNode: '3,2' };
    assert.deepEqual(
      placements((p) => slurmTask(p, uneven), 5).map(([, , lr, ls, cr]) => [lr, ls, cr]),
      [
        [0, 3, 0],
        [1, 3, 0],
        [2, 3, 0],
        [0, 2, 1],
        [1, 2, 1],
      ],
    );
  });

  it('the store port: MASTER_PORT when set, else derived from the job id (different jobs, different ports)', () => {
    const step = { nodelist: 'node[01-02]', tasksPerNode: '1(x2)' };
    const a = resolveConfig({}, slurmTask(1, { ...step, jobId: 100 }));
    const b = resolveConfig({}, slurmTask(1, { ...step, jobId: 101 }));
    assert.notEqual(a.storePort, b.storePort);
    for (const port of [a.storePort, b.storePort]) assert.ok(port >= 20_000 && port < 32_000, `port ${port}`);
    assert.equal(resolveConfig({}, { ...slurmTask(1, step), MASTER_PORT: '29555' }).storePort, 29555);
    assert.equal(resolveConfig({}, { ...slurmTask(1, step), RINGREDUCE_STORE_ADDR: 'x:1' }).storeHost, 'x');
  });

  it('tasks-per-node and compressed host lists parse as Slurm writes them', () => {
    assert.deepEqual(parseSlurmTasksPerNode('2(x3),1'), [2, 2, 2, 1]);
    assert.deepEqual(parseSlurmTasksPerNode('4'), [4]);
    assert.throws(() => parseSlurmTasksPerNode('2(x)'), InvalidArgumentError);
    assert.deepEqual(expandSlurmHostlist('node[01-03,07]'), ['node01', 'node02', 'node03', 'node07']);
    assert.deepEqual(expandSlurmHostlist('login,gpu[9-10]-ib'), ['login', 'gpu9-ib', 'gpu10-ib']);
    assert.deepEqual(expandSlurmHostlist('r[1-2]n[1-2]'), ['r1n1', 'r1n2', 'r2n1', 'r2n2']);
    assert.deepEqual(expandSlurmHostlist('c[008-010]'), ['c008', 'c009', 'c010']);
    assert.throws(() => expandSlurmHostlist('node[01-03'), /unclosed bracket/);
    assert.throws(() => expandSlurmHostlist('node[3-1]'), /bad range/);
    assert.deepEqual(slurmRendezvous({ SLURM_JOB_NODELIST: 'node[07,01-02]', SLURM_JOB_ID: '1' })?.host, 'node07');
    assert.equal(slurmRendezvous({}), undefined);
  });
});

describe('torchrun', () => {
  const torchrun = {
    RANK: '3',
    WORLD_SIZE: '4',
    LOCAL_RANK: '1',
    LOCAL_WORLD_SIZE: '2',
    GROUP_RANK: '1',
    GROUP_WORLD_SIZE: '2',
    MASTER_ADDR: '10.1.2.3',
    MASTER_PORT: '29500',
    TORCHELASTIC_RUN_ID: 'abc',
  };

  it("with the agent's store on MASTER_PORT, rank 0 hosts ours on the port next to it", () => {
    const c = resolveConfig({}, { ...torchrun, TORCHELASTIC_USE_AGENT_STORE: 'True' });
    assert.deepEqual(
      [c.rank, c.size, c.localRank, c.localSize, c.crossRank, c.crossSize, c.storeHost, c.storePort],
      [3, 4, 1, 2, 1, 2, '10.1.2.3', 29501],
    );
    assert.equal(resolveConfig({}, { ...torchrun, TORCHELASTIC_USE_AGENT_STORE: 'False' }).storePort, 29500);
    assert.equal(c.jobSource?.launcher, 'torchrun');
    assert.equal(c.jobSource?.suspicious, undefined);
  });
});

describe('variables left in the environment', () => {
  const leftover = { RANK: '1', WORLD_SIZE: '4', MASTER_ADDR: '10.0.0.9', MASTER_PORT: '29500' };

  it('are named, as not set by their launcher', () => {
    const c = resolveConfig({}, leftover);
    assert.equal(c.size, 4);
    assert.equal(c.jobSource?.variables, 'RANK=1, WORLD_SIZE=4');
    assert.match(c.jobSource?.suspicious ?? '', /TORCHELASTIC_RUN_ID is unset/);
  });

  it('RINGREDUCE_SIZE=1, or init({ size: 1 }), runs the process alone regardless', () => {
    const alone = resolveConfig({}, { ...leftover, RINGREDUCE_SIZE: '1' });
    assert.deepEqual([alone.rank, alone.size, alone.jobSource], [0, 1, undefined]);
    const byOption = resolveConfig({ size: 1 }, leftover);
    assert.deepEqual([byOption.rank, byOption.size, byOption.localSize], [0, 1, 1]);
    assert.throws(() => resolveConfig({}, { RINGREDUCE_SIZE: '2' }), /RINGREDUCE_SIZE=2 is set without RINGREDUCE_RANK/);
  });

  it('a job that cannot gather says which variables made it one', () => {
    assert.throws(
      () => resolveConfig({}, { RANK: '1', WORLD_SIZE: '4' }),
      /needs the rendezvous address.*rank 1 of 4 because RANK=1, WORLD_SIZE=4 are set .*set RINGREDUCE_SIZE=1 to run this process alone/,
    );
  });
});
