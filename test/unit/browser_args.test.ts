/** ringrun's browser flags: --browser K and its companions, parsed and checked (src/launcher/browser/browser_args.ts). */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgumentError } from '../../src/core/errors.js';
import { describeBrowser } from '../../src/launcher/browser/user_agent.js';
import { type LaunchConfig, parseArgs } from '../../src/launcher/cli.js';

function launch(...argv: string[]): LaunchConfig {
  const parsed = parseArgs(argv, () => '', {});
  assert.equal(parsed.kind, 'launch');
  return parsed.config;
}

function rejects(argv: string[], message: RegExp): void {
  assert.throws(
    () => parseArgs(argv, () => '', {}),
    (error: unknown) => error instanceof InvalidArgumentError && message.test(error.message),
    `expected an InvalidArgumentError matching ${message}`,
  );
}

describe('ringrun --browser', () => {
  it('adds browser ranks after the Node ranks, running the Node ranks script by default', () => {
    const config = launch(
      '-np',
      '2',
      '--browser',
      '3',
      '--headless',
      'node',
      '--enable-source-maps',
      '-r',
      './setup.js',
      'train.js',
      '--epochs',
      '1',
    );
    assert.deepEqual(config.browser, {
      count: 3,
      headless: true,
      script: 'train.js',
      args: ['--epochs', '1'],
      host: '127.0.0.1',
      port: 0,
    });
    assert.equal(config.np, 2);
  });

  it('runs browser ranks only with -np 0, which it refuses without --browser', () => {
    assert.equal(launch('-np', '0', '--browser', '4', 'node', 'train.js').np, 0);
    rejects(['-np', '0', 'node', 'train.js'], /-np must be a positive integer, got '0'/);
  });

  it('takes --browser-script, --browser-host and a certificate with its key', () => {
    const config = launch(
      '-np',
      '1',
      '--browser',
      '1',
      '--browser-script',
      'page.js',
      '--browser-host',
      '[::1]:8443',
      '--https-cert',
      'c.pem',
      '--https-key',
      'k.pem',
      'sh',
      '-c',
      'node train.js',
    );
    assert.deepEqual(config.browser, {
      count: 1,
      headless: false,
      script: 'page.js',
      args: [],
      host: '::1',
      port: 8443,
      tls: { certFile: 'c.pem', keyFile: 'k.pem' },
    });
  });

  it('asks for --browser-script when the command is not node with a script', () => {
    rejects(['-np', '1', '--browser', '1', 'sh', '-c', 'node train.js'], /give the browser ranks theirs with --browser-script/);
    rejects(['-np', '1', '--browser', '1', 'node', '-e', 'x'], /--browser-script/);
  });

  it('refuses companions without --browser, a lone half of the certificate, and jobs browsers cannot join', () => {
    rejects(['-np', '1', '--headless', 'node', 'a.js'], /--headless needs --browser <count>/);
    rejects(['-np', '1', '--browser-script', 'b.js', 'node', 'a.js'], /--browser-script needs --browser/);
    rejects(['-np', '1', '--browser', '1', '--https-cert', 'c.pem', 'node', 'a.js'], /--https-cert and --https-key together/);
    rejects(['-np', '1', '--browser', '0', 'node', 'a.js'], /--browser must be a positive integer/);
    rejects(['-np', '1', '--browser', '1', '--backend', 'mpi', 'node', 'a.js'], /not mpi/);
    rejects(['-np', '2', '-H', 'a:1,b:1', '--browser', '1', 'node', 'a.js'], /no -H or --hostfile/);
    rejects(
      ['-np', '1', '--browser', '1', '--browser-host', 'a:b:c', 'node', 'a.js'],
      /--browser-host must be host or host:port/,
    );
  });
});

describe('browser names in reports', () => {
  it('shortens User-Agent strings to browser, version and system', () => {
    assert.equal(
      describeBrowser(
        'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/156.0.0.0 Safari/537.36',
      ),
      'headless Chrome 156 on Linux',
    );
    assert.equal(
      describeBrowser('Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:131.0) Gecko/20100101 Firefox/131.0'),
      'Firefox 131 on Windows',
    );
    assert.equal(
      describeBrowser(
        'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15',
      ),
      'Safari 17 on macOS',
    );
    assert.equal(describeBrowser(''), 'a browser');
  });
});
