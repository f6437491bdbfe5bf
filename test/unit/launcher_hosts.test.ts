import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { InvalidArgumentError } from '../../src/core/errors.js';
import { parseArgs } from '../../src/launcher/cli.js';
import { describeExit, notStartedReport } from '../../src/launcher/failure_report.js';
import { isLocalHost, parseHostfile, parseHostList } from '../../src/launcher/hosts.js';
import { placeRanks } from '../../src/launcher/placement.js';
import { kRemoteCommand, remoteScript, shellQuote, sshArgv } from '../../src/launcher/remote_shell.js';
import { mpirunArgv, retagMpiOutput } from '../../src/launcher/run_mpi.js';

describe('hosts', () => {
  it('parses -H with and without slots, IPv6 in brackets, and merges repeats', () => {
    assert.deepEqual(parseHostList('a:2,b,[::1]:3,10.0.0.1:4,a:1'), [
      { host: 'a', slots: 3 },
      { host: 'b', slots: 1 },
      { host: '::1', slots: 3 },
      { host: '10.0.0.1', slots: 4 },
    ]);
    assert.throws(() => parseHostList('a:0'), /slots must be a positive integer, got '0'/);
    assert.throws(() => parseHostList('a:x'), InvalidArgumentError);
    assert.throws(() => parseHostList(','), /lists no hosts/);
    assert.throws(() => parseHostList('a;rm -rf:1'), /bad host name/);
  });

  it("parses a hostfile of 'host slots=N' lines, with comments", () => {
    const text = '# cluster\nnode1 slots=4\n\nnode2 slots=2 max_slots=8  # spare\nnode3\n';
    assert.deepEqual(parseHostfile(text, 'hosts.txt'), [
      { host: 'node1', slots: 4 },
      { host: 'node2', slots: 2 },
      { host: 'node3', slots: 1 },
    ]);
    assert.throws(() => parseHostfile('node1 cpus=4', 'h'), /h:1: expected 'host slots=N'/);
  });

  it('knows this machine by name and address, not 127.0.0.2', () => {
    assert.ok(isLocalHost('localhost'));
    assert.ok(isLocalHost('127.0.0.1'));
    assert.ok(!isLocalHost('127.0.0.2'));
    assert.ok(!isLocalHost('no-such-host.invalid'));
  });

  it('places ranks host by host, with local and cross rank and size', () => {
    const hosts = [
      { host: 'a', slots: 2 },
      { host: 'b', slots: 2 },
      { host: 'c', slots: 4 },
    ];
    const placed = placeRanks(5, hosts, (h) => h === 'a');
    assert.deepEqual(
      placed.map((p) => [p.rank, p.host, p.localRank, p.localSize, p.crossRank, p.crossSize, p.local]),
      [
        [0, 'a', 0, 2, 0, 3, true],
        [1, 'a', 1, 2, 0, 3, true],
        [2, 'b', 0, 2, 1, 3, false],
        [3, 'b', 1, 2, 1, 3, false],
        [4, 'c', 0, 1, 2, 3, false],
      ],
    );
    assert.throws(() => placeRanks(9, hosts, () => false), /-np 9 is more than the 8 slots/);
  });

  it('takes -np from the slots, and the hosts from -H or --hostfile', () => {
    const parsed = parseArgs(['-H', 'a:2,b:3', 'node', 'x.js']);
    assert.equal(parsed.kind === 'launch' && parsed.config.np, 5);
    const fromFile = parseArgs(['-np', '2', '--hostfile', 'h.txt', 'node'], () => 'a slots=2\n');
    assert.deepEqual(fromFile.kind === 'launch' && fromFile.config.hosts, [{ host: 'a', slots: 2 }]);
    assert.throws(
      () =>
        parseArgs(['--hostfile', 'missing', 'node'], () => {
          throw new Error('ENOENT');
        }),
      /--hostfile missing: ENOENT/,
    );
    assert.throws(() => parseArgs(['-H', 'a', '--hostfile', 'h', 'node']), /not both/);
    assert.throws(() => parseArgs(['-np', '2', '--backend', 'gloo', 'node']), /--backend must be tcp or mpi/);
    assert.throws(() => parseArgs(['-np', '2', '-x', '1BAD', 'node']), /-x must be NAME or NAME=VALUE/);
    assert.throws(() => parseArgs(['-np', '2', '--ssh-port', '70000', 'node']), /--ssh-port must be a port number/);
  });
});

describe('remote shell', () => {
  it('quotes any value for a POSIX shell', () => {
    for (const value of ["it's", 'a b', '$HOME', '`id`', '\\', '"', '', '*']) {
      assert.equal(execFileSync('sh', ['-c', `printf %s ${shellQuote(value)}`], { encoding: 'utf8' }), value);
    }
  });

  it('puts only the fixed bootstrap on the command line; ssh options only for ssh', () => {
    assert.deepEqual(sshArgv({ command: ['ssh'], port: 2222, identity: '/k', connectTimeoutS: 30 }, 'node1'), [
      'ssh',
      '-T',
      '-o',
      'BatchMode=yes',
      '-o',
      'ConnectTimeout=30',
      '-o',
      'ServerAliveInterval=5',
      '-o',
      'ServerAliveCountMax=3',
      '-p',
      '2222',
      '-i',
      '/k',
      'node1',
      kRemoteCommand,
    ]);
    assert.deepEqual(sshArgv({ command: ['/x/fake', '-v'], connectTimeoutS: 5 }, 'h'), ['/x/fake', '-v', 'h', kRemoteCommand]);
    assert.doesNotMatch(kRemoteCommand.slice(7, -1), /'/);
  });

  it('sends environment, directory and command on stdin', () => {
    const script = remoteScript('M', { RINGREDUCE_SECRET: 's3cr3t', X: "it's" }, '/tmp', 'node', ['a b']);
    assert.equal(
      script,
      "M\nRINGREDUCE_SECRET='s3cr3t'\nexport RINGREDUCE_SECRET\nX='it'\\''s'\nexport X\n" +
        "cd '/tmp' 2>/dev/null || printf 'ringrun: no directory %s on %s; running in %s\\n' '/tmp' \"$(hostname)\" \"$PWD\" >&2\n" +
        "set -- 'node' 'a b'\nM\n",
    );
    assert.throws(() => remoteScript('M', { 'X-Y': '1' }, undefined, 'node', []), /not a shell name/);
  });

  it('runs a rank through the bootstrap: any value arrives intact, the exit status comes back', () => {
    const tricky = "line 1\n  'quoted' \\n \\\\ $HOME `x` %s\r\nend\n\n";
    const out = execFileSync('sh', ['-c', `(cat; sleep 2) | ${kRemoteCommand}; echo "status $?"`], {
      input: remoteScript('MARK', { TRICKY: tricky }, '/', process.execPath, [
        '-e',
        'console.log(JSON.stringify([process.env.TRICKY, process.argv[1], process.cwd()]));\nprocess.exit(3)',
        tricky,
      ]),
      encoding: 'utf8',
    });
    const [marker, json, status] = out.trim().split('\n');
    assert.equal(marker, 'MARK');
    assert.deepEqual(JSON.parse(json ?? ''), [tricky, tricky, '/']);
    assert.equal(status, 'status 3');
  });
});

describe('mpirun', () => {
  it('passes the hosts and the variable names, never their values', () => {
    const parsed = parseArgs(['-np', '4', '-H', 'a:2,b:2', '--backend', 'mpi', '--io-timeout', '5s', 'node', 'train.js']);
    assert.ok(parsed.kind === 'launch');
    assert.deepEqual(mpirunArgv(parsed.config, ['RINGREDUCE_BACKEND', 'RINGREDUCE_IO_TIMEOUT_MS']), [
      '--allow-run-as-root',
      '--bind-to',
      'none',
      '--tag-output',
      '-np',
      '4',
      '-H',
      'a:2,b:2',
      '-x',
      'RINGREDUCE_BACKEND',
      '-x',
      'RINGREDUCE_IO_TIMEOUT_MS',
      'node',
      'train.js',
    ]);
  });

  it('lets a local job have more ranks than cores', () => {
    const parsed = parseArgs(['-np', '8', '--backend', 'mpi', 'node', 'train.js']);
    assert.ok(parsed.kind === 'launch');
    assert.deepEqual(mpirunArgv(parsed.config, []), [
      '--allow-run-as-root',
      '--bind-to',
      'none',
      '--tag-output',
      '-np',
      '8',
      '--oversubscribe',
      'node',
      'train.js',
    ]);
  });
});

describe("mpirun's output", () => {
  it("writes each rank's tag as ringrun's [rank] prefix and leaves mpirun's own lines alone", () => {
    const text = '[1,0]<stdout>:hello\n[1,12]<stderr>:  indented: [1,2]<stdout>:\nmpirun noticed that process rank 1 exited\n';
    assert.equal(retagMpiOutput(text), '[0] hello\n[12]   indented: [1,2]<stdout>:\nmpirun noticed that process rank 1 exited\n');
  });
});

describe('failure report of a remote rank', () => {
  const exit = { rank: 3, pid: 42, signal: null, host: 'node2' } as const;
  it('reads the status that came through ssh', () => {
    assert.equal(describeExit({ ...exit, code: 137 }), 'on node2 was killed by SIGKILL (exit status 137)');
    assert.equal(describeExit({ ...exit, code: 1 }), 'on node2 exited with code 1');
    assert.match(describeExit({ ...exit, code: 255 }), /^on node2 exited with code 255: ssh failed/);
    assert.equal(describeExit({ ...exit, code: null, signal: 'SIGKILL' }), 'on node2: its ssh session was killed by SIGKILL');
    assert.equal(describeExit({ ...exit, host: undefined, code: null, signal: 'SIGTERM' }), 'was killed by SIGTERM');
  });

  it('names the ranks that did not start, with their last lines', () => {
    assert.deepEqual(
      notStartedReport(
        [
          { rank: 1, host: 'b', lastLines: ['ssh: connect to host b port 22: No route to host'] },
          { rank: 2, host: 'c', lastLines: [] },
        ],
        5000,
      ),
      [
        'job failed: ranks 1, 2 did not start within 5000 ms',
        'last 1 lines of rank 1 on b:',
        '  [1] ssh: connect to host b port 22: No route to host',
        'rank 2 on c printed nothing',
      ],
    );
  });
});
