import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgumentError } from '../../src/core/errors.js';
import { type LaunchConfig, normaliseArgv, parseArgs } from '../../src/launcher/cli.js';
import {
  allocatorEnv,
  contractEnv,
  jobWideEnv,
  kAllocatorEnv,
  localPlacements,
  settingsEnv,
} from '../../src/launcher/env_contract.js';

function launch(...argv: string[]): LaunchConfig {
  const parsed = parseArgs(argv);
  assert.equal(parsed.kind, 'launch');
  return parsed.config;
}

/** Asserts that parsing fails with an InvalidArgumentError whose message matches `message`. */
function rejects(argv: string[], message: RegExp): void {
  assert.throws(
    () => parseArgs(argv),
    (error: unknown) => {
      assert.ok(error instanceof InvalidArgumentError, `expected InvalidArgumentError, got ${String(error)}`);
      assert.match(error.message, message);
      return true;
    },
  );
}

describe('ringrun arguments: the rank count', () => {
  it('accepts -np, -n and --np in all their spellings', () => {
    for (const argv of [['-np', '3'], ['-np=3'], ['-n', '3'], ['-n3'], ['--np', '3'], ['--np=3']]) {
      assert.equal(launch(...argv, 'node', 'train.js').np, 3, argv.join(' '));
    }
  });

  it('rejects counts that are not positive integers, naming -np', () => {
    for (const bad of ['0', '-1', '2.5', 'abc', '3x', ''])
      rejects(['-np', bad, 'node'], /-np must be a positive integer, got '.*'/);
  });

  it('requires -np and its value', () => {
    rejects(['node', 'train.js'], /missing -np/);
    rejects(['-np'], /option '-n, --np <count>' argument missing/);
  });
});

describe('ringrun arguments: the command', () => {
  it("passes the command's own flags through untouched, even ones ringrun also has", () => {
    const config = launch('-np', '2', 'node', '--inspect', 'train.js', '-np', '5', '--verbose', '--log-level', 'x', '--', 'y');
    assert.equal(config.command, 'node');
    assert.deepEqual(config.args, ['--inspect', 'train.js', '-np', '5', '--verbose', '--log-level', 'x', '--', 'y']);
    assert.equal(config.verbose, false);
    assert.deepEqual(config.settings, {});
  });

  it("accepts '--' to end ringrun's options", () => {
    const config = launch('-np', '2', '--verbose', '--', '--odd-command', '-np', '1');
    assert.equal(config.command, '--odd-command');
    assert.deepEqual(config.args, ['-np', '1']);
    assert.equal(config.verbose, true);
  });

  it('requires a command', () => {
    rejects(['-np', '2'], /missing the command/);
    rejects(['-np', '2', '--'], /missing the command/);
  });

  it('rejects unknown options before the command, naming them', () => {
    rejects(['-np', '2', '--bogus', 'node'], /unknown option '--bogus'/);
  });
});

describe('ringrun arguments: engine settings and other flags', () => {
  it('maps every flag to its setting', () => {
    const config = launch(
      '-np',
      '2',
      '--start-timeout',
      '2m',
      '--io-timeout',
      '1500ms',
      '--stall-timeout',
      '0',
      '--log-level',
      'DEBUG',
      '--output-dir',
      'logs',
      '--verbose',
      'node',
      'x.js',
    ); // prettier-ignore
    assert.deepEqual(config.settings, { startTimeoutMs: 120_000, ioTimeoutMs: 1500, stallTimeoutMs: 0, logLevel: 'debug' });
    assert.equal(config.outputDir, 'logs');
    assert.equal(config.verbose, true);
  });

  it('--tls: RINGREDUCE_TLS=1 for every rank; refused with MPI and with browser ranks', () => {
    const config = launch('-np', '2', '--tls', 'node', 'x.js');
    assert.deepEqual(config.settings, { tls: true });
    assert.equal(settingsEnv(config.settings).RINGREDUCE_TLS, '1');
    assert.equal(settingsEnv(launch('-np', '2', 'node', 'x.js').settings).RINGREDUCE_TLS, undefined);
    assert.throws(() => launch('-np', '2', '--tls', '--backend', 'mpi', 'node'), /--tls applies to the tcp backend/);
    assert.throws(() => launch('-np', '2', '--tls', '--browser', '1', 'node', 'x.js'), /--tls does not cover browser ranks/);
  });

  it('reads durations in ms, s, m and h', () => {
    const cases: Array<[string, number]> = [
      ['250ms', 250],
      ['1.5s', 1500],
      ['2m', 120_000],
      ['1h', 3_600_000],
    ];
    for (const [text, ms] of cases) {
      assert.equal(launch('-np', '1', '--io-timeout', text, 'node').settings.ioTimeoutMs, ms, text);
    }
  });

  it('refuses a bare number (seconds to horovodrun, milliseconds to RINGREDUCE_*_MS) for every duration flag, but 0', () => {
    const flags = ['--start-timeout', '--io-timeout', '--heartbeat', '--stall-warning', '--stall-timeout'];
    for (const flag of flags) {
      rejects(
        ['-np', '1', flag, '30', 'node'],
        new RegExp(`^${flag} 30 has no unit: write 30s for seconds or 30ms for milliseconds$`),
      );
    }
    for (const flag of ['--discovery-interval', '--elastic-timeout']) {
      rejects(['-np', '2', '--elastic', flag, '1.5', 'node'], new RegExp(`^${flag} 1.5 has no unit: write 1.5s`));
    }
    assert.equal(launch('-np', '1', '--stall-timeout', '0', 'node').settings.stallTimeoutMs, 0);
    assert.equal(launch('-np', '1', '--heartbeat', '0', 'node').settings.heartbeatMs, 0);
    const help = parseArgs(['--help']);
    assert.ok(help.kind === 'help' && /A bare\s+number is refused/.test(help.text), 'the help says so');
  });

  it('rejects bad durations, naming the flag', () => {
    rejects(['-np', '1', '--start-timeout', '0', 'node'], /--start-timeout must be more than 0 ms, got '0'/);
    rejects(['-np', '1', '--io-timeout', '0s', 'node'], /--io-timeout must be more than 0 ms/);
    rejects(['-np', '1', '--io-timeout', '10x', 'node'], /--io-timeout must be a duration .* got '10x'/);
    rejects(['-np', '1', '--stall-timeout', '-5', 'node'], /--stall-timeout must be a duration .* got '-5'/);
    // Beyond setTimeout's range Node would silently fire after 1 ms.
    rejects(['-np', '1', '--stall-timeout', '30d', 'node'], /--stall-timeout must be a duration/);
    rejects(['-np', '1', '--stall-timeout', '25000h', 'node'], /--stall-timeout must be at most 2147483647 ms/);
  });

  it('rejects an unknown log level, naming the flag and the choices', () => {
    rejects(['-np', '1', '--log-level', 'loud', 'node'], /--log-level must be one of error, warn, info, debug, got 'loud'/);
  });

  it('rejects a missing flag value, naming the flag', () => {
    rejects(['-np', '1', '--output-dir'], /option '--output-dir <dir>' argument missing/);
    rejects(['-np', '1', '--output-dir', '', 'node'], /--output-dir must not be empty/);
  });

  it('shows the help with examples', () => {
    for (const flag of ['--help', '-h']) {
      const parsed = parseArgs([flag]);
      assert.equal(parsed.kind, 'help');
      if (parsed.kind !== 'help') return;
      assert.match(parsed.text, /Usage: ringrun -np <count> \[-H <hosts>\] \[options\] <command> \[args\.\.\.\]/);
      assert.match(parsed.text, /--stall-timeout <duration>/);
      assert.match(parsed.text, /Examples:\n {2}ringrun -np 4 node train\.js/);
    }
  });
});

describe('normaliseArgv', () => {
  const valueFlags = new Set(['-n', '--np', '--output-dir']);

  it('rewrites -np only among ringrun options', () => {
    assert.deepEqual(normaliseArgv(['-np', '2', 'cmd', '-np', '3'], valueFlags), ['--np', '2', 'cmd', '-np', '3']);
    assert.deepEqual(normaliseArgv(['-np=2', 'cmd'], valueFlags), ['--np=2', 'cmd']);
    assert.deepEqual(normaliseArgv(['--', '-np', '2'], valueFlags), ['--', '-np', '2']);
  });

  it("does not mistake a flag's value for -np", () => {
    assert.deepEqual(normaliseArgv(['--output-dir', '-np', '-np', '2'], valueFlags), ['--output-dir', '-np', '--np', '2']);
  });
});

describe('the environment a rank gets', () => {
  it('writes identity, store and job id, and only the settings that were given', () => {
    const config = launch('-np', '3', '--stall-timeout', '5s', 'node');
    const job = { size: config.np, storeAddr: '127.0.0.1:4000', jobId: 'abc', settings: config.settings };
    const placement = localPlacements(3)[2];
    assert.ok(placement !== undefined);
    assert.deepEqual(contractEnv(job, placement), {
      RINGREDUCE_RANK: '2',
      RINGREDUCE_SIZE: '3',
      RINGREDUCE_LOCAL_RANK: '2',
      RINGREDUCE_LOCAL_SIZE: '3',
      RINGREDUCE_CROSS_RANK: '0',
      RINGREDUCE_CROSS_SIZE: '1',
      RINGREDUCE_STORE_ADDR: '127.0.0.1:4000',
      RINGREDUCE_ADDRESS: '127.0.0.1',
      RINGREDUCE_JOB_ID: 'abc',
      RINGREDUCE_STALL_TIMEOUT_MS: '5000',
    });
  });

  it("gives a browser rank the job-wide settings of ringrun's environment, which a Node rank inherits", () => {
    const env = {
      RINGREDUCE_SEGMENT_BYTES: '65536',
      RINGREDUCE_HIERARCHICAL_ALLREDUCE: 'off',
      RINGREDUCE_STALL_TIMEOUT_MS: '9000',
      RINGREDUCE_SHARED_MEMORY: '0',
      RINGREDUCE_RANK: '5',
      HOME: '/root',
    };
    assert.deepEqual(jobWideEnv(env), {
      RINGREDUCE_SEGMENT_BYTES: '65536',
      RINGREDUCE_HIERARCHICAL_ALLREDUCE: 'off',
      RINGREDUCE_STALL_TIMEOUT_MS: '9000',
    });
  });

  it('keeps glibc from returning freed memory, unless the user chose allocator settings', () => {
    assert.deepEqual(allocatorEnv({}), { MALLOC_MMAP_THRESHOLD_: '1073741824', MALLOC_TRIM_THRESHOLD_: '4294967296' });
    assert.deepEqual(allocatorEnv({ MALLOC_TRIM_THRESHOLD_: '0' }), {});
    assert.deepEqual(allocatorEnv({ MALLOC_MMAP_THRESHOLD_: '65536' }), {});
    assert.deepEqual(Object.keys(kAllocatorEnv).sort(), ['MALLOC_MMAP_THRESHOLD_', 'MALLOC_TRIM_THRESHOLD_']);
  });
});
