/** `ringrun --dashboard [host:port]`: the value is optional, and a swallowed command is refused with advice. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidArgumentError } from '../../src/core/errors.js';
import { parseArgs } from '../../src/launcher/cli.js';
import { parseDashboardAddress } from '../../src/launcher/dashboard/address.js';

function dashboardOf(...argv: string[]) {
  const parsed = parseArgs(argv, () => '', {});
  assert.equal(parsed.kind, 'launch');
  return parsed.kind === 'launch' ? { dashboard: parsed.dashboard, config: parsed.config } : undefined;
}

test('--dashboard with and without an address, before or after -np', () => {
  assert.equal(dashboardOf('-np', '2', 'node', 'x.js')?.dashboard, undefined);
  assert.deepEqual(dashboardOf('--dashboard', '-np', '2', 'node', 'x.js')?.dashboard, { host: '127.0.0.1', port: 0 });
  const before = dashboardOf('--dashboard', '-np', '3', 'node', 'x.js');
  assert.equal(before?.config.np, 3, '-np after a --dashboard without a value is still -np');
  assert.deepEqual(dashboardOf('-np', '2', '--dashboard', '8080', 'node')?.dashboard, { host: '127.0.0.1', port: 8080 });
  assert.deepEqual(dashboardOf('--dashboard', '0.0.0.0:9000', '-np', '2', 'node')?.dashboard, { host: '0.0.0.0', port: 9000 });
  assert.equal(dashboardOf('--dashboard', '0.0.0.0:9000', '-np', '2', 'node')?.config.np, 2);
  assert.deepEqual(dashboardOf('-np', '2', '--dashboard=', 'node')?.dashboard, { host: '127.0.0.1', port: 0 });
  assert.deepEqual(dashboardOf('-np', '2', '--dashboard', '[::1]:80', 'node')?.dashboard, { host: '::1', port: 80 });
  // The command after a --dashboard without a value: refused, saying how to write it.
  assert.throws(
    () => dashboardOf('-np', '2', '--dashboard', 'node', 'x.js'),
    /--dashboard takes \[host:\]port.*got 'node'.*--dashboard=/,
  );
});

test('addresses', () => {
  assert.deepEqual(parseDashboardAddress(undefined), { host: '127.0.0.1', port: 0 });
  assert.deepEqual(parseDashboardAddress(true), { host: '127.0.0.1', port: 0 });
  assert.deepEqual(parseDashboardAddress('localhost:3000'), { host: 'localhost', port: 3000 });
  for (const bad of ['70000', 'host:', ':80', '[nothost]:80', 'a:b:80', '-1']) {
    assert.throws(() => parseDashboardAddress(bad), InvalidArgumentError, bad);
  }
});
