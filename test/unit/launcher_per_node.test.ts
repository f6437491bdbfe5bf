/**
 * ringrun's per-node flags (launcher/node_args.ts, cli.ts): explicit, from Slurm's variables
 * (`--slurm`, or any per-node flag inside an srun step), and the flags that do not apply;
 * `--version`, `--check-build` and `--timeline`.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgumentError } from '../../src/core/errors.js';
import { kVersion } from '../../src/core/version.js';
import { type LaunchConfig, parseArgs } from '../../src/launcher/cli.js';
import { parseEndpoint } from '../../src/launcher/node_args.js';

type Env = Record<string, string>;
const noFile = (path: string): string => {
  throw new Error(`no file ${path}`);
};

function launch(argv: string[], env: Env = {}): LaunchConfig {
  const parsed = parseArgs(argv, noFile, env);
  assert.equal(parsed.kind, 'launch');
  return parsed.config;
}

function rejects(argv: string[], message: RegExp, env: Env = {}): void {
  assert.throws(
    () => parseArgs(argv, noFile, env),
    (error: unknown) => error instanceof InvalidArgumentError && message.test(error.message),
    `${argv.join(' ')} should fail with ${message}`,
  );
}

/** What srun gives the launcher of node `nodeId` (one task per node) in a job of `nodes` nodes. */
function srunLauncher(nodeId: number, nodes = 2): Env {
  return {
    SLURM_JOB_ID: '777',
    SLURM_STEP_ID: '0',
    SLURM_NODEID: String(nodeId),
    SLURM_PROCID: String(nodeId),
    SLURM_LOCALID: '0',
    SLURM_NNODES: String(nodes),
    SLURM_STEP_NUM_NODES: String(nodes),
    SLURM_NTASKS: String(nodes),
    SLURM_NTASKS_PER_NODE: '1',
    SLURM_TASKS_PER_NODE: `1(x${nodes})`,
    SLURM_JOB_NODELIST: `gpu[01-0${nodes}]`,
    SLURM_STEP_NODELIST: `gpu[01-0${nodes}]`,
  };
}

describe('per-node mode', () => {
  it('takes the nodes, this node, its ranks and the endpoint from the flags', () => {
    const config = launch([
      '--nnodes',
      '3',
      '--node-rank',
      '2',
      '--nproc-per-node',
      '4',
      '--rdzv-endpoint',
      'head:29500',
      'node',
      't.js',
    ]);
    assert.deepEqual(config.perNode, {
      nnodes: 3,
      nodeRank: 2,
      nprocPerNode: 4,
      endpoint: { host: 'head', port: 29500 },
      fromSlurm: [],
    });
    assert.equal(config.np, 12);
    assert.equal(config.command, 'node');
  });

  it('one node needs no endpoint; several need it and --node-rank', () => {
    const one = launch(['--nproc-per-node', '2', 'node', 't.js']);
    assert.deepEqual([one.perNode?.nnodes, one.perNode?.nodeRank, one.perNode?.endpoint, one.np], [1, 0, undefined, 2]);
    rejects(['--nnodes', '2', '--node-rank', '0', 'node'], /--rdzv-endpoint host:port is needed with --nnodes 2/);
    rejects(['--nnodes', '2', '--rdzv-endpoint', 'h:1', 'node'], /--node-rank is needed with --nnodes 2/);
    rejects(['--nnodes', '2', '--node-rank', '2', '--rdzv-endpoint', 'h:1', 'node'], /--node-rank 2 is not a node of --nnodes 2/);
    rejects(['--nnodes', '0', 'node'], /--nnodes must be a positive integer/);
  });

  it('refuses the flags of one launcher for the whole job', () => {
    const pn = ['--nnodes', '2', '--node-rank', '0', '--rdzv-endpoint', 'h:1'];
    rejects([...pn, '-np', '4', 'node'], /give -np or the per-node flags/);
    rejects([...pn, '-H', 'a,b', 'node'], /-H and --hostfile are for one ringrun/);
    rejects([...pn, '--backend', 'mpi', 'node'], /--backend does not apply to the per-node mode/);
    rejects([...pn, '--address', '10.0.0.1', 'node'], /--address does not apply/);
    rejects([...pn, '--elastic', 'node'], /the elastic per-node mode takes no --node-rank/);
  });

  it('--elastic --nnodes MIN:MAX: the elastic per-node mode, without node ranks', () => {
    const config = launch(['--elastic', '--nnodes', '2:4', '--nproc-per-node', '3', '--rdzv-endpoint', 'head', 'node']);
    assert.equal(config.perNode, undefined);
    assert.equal(config.elastic, undefined);
    assert.deepEqual(config.elasticNodes, {
      minNodes: 2,
      maxNodes: 4,
      nprocPerNode: 3,
      endpoint: { host: 'head', port: 29400 },
      rdzvId: 'none',
      lastCallMs: 1000,
      timeoutMs: 60_000,
    });
    const fixed = launch(['--elastic', '--nnodes', '2', '--rdzv-endpoint', 'h:1', '--rdzv-id', 'job-7', 'node']).elasticNodes;
    assert.deepEqual([fixed?.minNodes, fixed?.maxNodes, fixed?.rdzvId], [2, 2, 'job-7']);
    const en = ['--elastic', '--nnodes', '1:2', '--rdzv-endpoint', 'h:1'];
    rejects(
      ['--nnodes', '2:3', '--node-rank', '0', '--rdzv-endpoint', 'h:1', 'node'],
      /--nnodes 2:3 \(MIN:MAX\) needs --elastic/,
    );
    rejects(['--elastic', '--nnodes', '3:2', '--rdzv-endpoint', 'h:1', 'node'], /MIN must not exceed MAX/);
    rejects(['--elastic', '--nnodes', '2:3', 'node'], /needs --rdzv-endpoint/);
    rejects([...en, '--min-np', '2', 'node'], /takes no --min-np/);
    rejects([...en, '--slurm', 'node'], /--slurm is for the fixed per-node mode/);
    rejects([...en, '-np', '2', 'node'], /give -np or the per-node flags/);
    rejects([...en, '--rdzv-id', 'a/b', 'node'], /--rdzv-id must be/);
    rejects(['-np', '2', '--elastic', '--rdzv-id', 'x', 'node'], /--rdzv-id needs --nnodes/);
  });

  it('endpoints: host:port, [v6]:port, a host alone gets port 29400', () => {
    assert.deepEqual(parseEndpoint('10.0.0.1:1234'), { host: '10.0.0.1', port: 1234 });
    assert.deepEqual(parseEndpoint('[fd00::1]:99'), { host: 'fd00::1', port: 99 });
    assert.deepEqual(parseEndpoint('fd00::1'), { host: 'fd00::1', port: 29400 });
    assert.deepEqual(parseEndpoint('head'), { host: 'head', port: 29400 });
    assert.throws(() => parseEndpoint('head:99999'), /port number/);
    assert.throws(() => parseEndpoint(':1'), /must be host:port/);
  });
});

describe('per-node mode under Slurm', () => {
  it('--slurm takes the nodes, this node and the endpoint from an srun step of 2 nodes', () => {
    for (const node of [0, 1]) {
      const config = launch(['--slurm', '--nproc-per-node', '2', 'node', 't.js'], srunLauncher(node));
      assert.equal(config.perNode?.nnodes, 2);
      assert.equal(config.perNode?.nodeRank, node);
      assert.equal(config.perNode?.endpoint?.host, 'gpu01');
      assert.ok((config.perNode?.endpoint?.port ?? 0) >= 20_000);
      assert.equal(config.np, 4);
      assert.match(config.perNode?.fromSlurm.join('\n') ?? '', /--nnodes 2 from SLURM_STEP_NUM_NODES/);
    }
    // Every node derives the same endpoint.
    const ports = [0, 1].map((n) => launch(['--slurm', 'node'], srunLauncher(n)).perNode?.endpoint?.port);
    assert.equal(ports[0], ports[1]);
  });

  it('inside an srun step any per-node flag is enough; flags win over Slurm', () => {
    const auto = launch(['--nproc-per-node', '4', 'node', 't.js'], srunLauncher(1, 3));
    assert.deepEqual([auto.perNode?.nnodes, auto.perNode?.nodeRank, auto.np], [3, 1, 12]);
    const given = launch(['--nnodes', '2', '--rdzv-endpoint', 'x:5', 'node'], srunLauncher(1, 3));
    assert.deepEqual([given.perNode?.nnodes, given.perNode?.nodeRank, given.perNode?.endpoint], [2, 1, { host: 'x', port: 5 }]);
  });

  it('-np inside an allocation stays one launcher for the job; --slurm outside one is refused', () => {
    assert.equal(launch(['-np', '2', 'node'], srunLauncher(0)).perNode, undefined);
    rejects(['--slurm', 'node'], /--slurm: not inside a Slurm allocation/);
  });
});

describe('--version, --check-build, --timeline', () => {
  it('--version and --check-build need no command', () => {
    assert.deepEqual(parseArgs(['--version'], noFile, {}), { kind: 'version' });
    assert.deepEqual(parseArgs(['--check-build'], noFile, {}), { kind: 'check-build' });
    assert.match(kVersion, /^\d+\.\d+\.\d+/);
  });

  it('--timeline takes a file', () => {
    assert.equal(launch(['-np', '2', '--timeline', 'trace.json', 'node']).timeline, 'trace.json');
    assert.equal(launch(['-np', '2', 'node']).timeline, undefined);
    rejects(['-np', '2', '--timeline', '', 'node'], /--timeline must not be empty/);
    assert.equal(launch(['-np', '2', '--timeline', './trace', 'node']).timeline, './trace');
  });

  it('--timeline refuses a command it swallowed, saying how to write it', () => {
    for (const value of ['node', 'python3', 'train.js']) {
      rejects(['-np', '2', '--timeline', value, 'x.js'], new RegExp(`got '${value}', which looks like the command`));
    }
    rejects(['-np', '2', '--timeline', 'node', 'x.js'], /write --timeline trace\.json before the command/);
  });
});
