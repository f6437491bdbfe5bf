/** The settings of failure detection and security in the config (docs/env.md). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { resolveConfig } from '../../src/core/config.js';

const job = { RINGREDUCE_RANK: '1', RINGREDUCE_SIZE: '2', RINGREDUCE_STORE_ADDR: '127.0.0.1:5000' };

test('the secret comes from RINGREDUCE_SECRET or init(); a job of one rank drops it', () => {
  assert.equal(resolveConfig({}, { ...job, RINGREDUCE_SECRET: 'abc' }).secret, 'abc');
  assert.equal(resolveConfig({ secret: 'opt' }, { ...job, RINGREDUCE_SECRET: 'abc' }).secret, 'opt');
  assert.equal(resolveConfig({}, job).secret, undefined);
  assert.equal(resolveConfig({}, { RINGREDUCE_SECRET: 'abc' }).secret, undefined);
  assert.throws(() => resolveConfig({ secret: '' }, job), /init option 'secret'/);
});

test('heartbeat, stall warning and network interface: defaults, variables, options', () => {
  const defaults = resolveConfig({}, job);
  assert.deepEqual(
    [defaults.heartbeatMs, defaults.stallWarningMs, defaults.stallTimeoutMs, defaults.networkInterface],
    [2000, 30_000, 60_000, undefined],
  );
  const fromEnv = resolveConfig(
    {},
    { ...job, RINGREDUCE_HEARTBEAT_MS: '0', RINGREDUCE_STALL_WARNING_MS: '500', RINGREDUCE_NETWORK_INTERFACE: 'eth1' },
  );
  assert.deepEqual([fromEnv.heartbeatMs, fromEnv.stallWarningMs, fromEnv.networkInterface], [0, 500, 'eth1']);
  assert.equal(resolveConfig({ heartbeatMs: 250 }, { ...job, RINGREDUCE_HEARTBEAT_MS: '9' }).heartbeatMs, 250);
  assert.throws(() => resolveConfig({}, { ...job, RINGREDUCE_HEARTBEAT_MS: 'often' }), /RINGREDUCE_HEARTBEAT_MS="often"/);
});

test('tls comes from RINGREDUCE_TLS or init(), is off by default, and needs the secret', () => {
  const secret = { ...job, RINGREDUCE_SECRET: 'abc' };
  assert.equal(resolveConfig({}, secret).tls, false);
  assert.equal(resolveConfig({}, { ...secret, RINGREDUCE_TLS: '1' }).tls, true);
  assert.equal(resolveConfig({}, { ...secret, RINGREDUCE_TLS: '0' }).tls, false);
  assert.equal(resolveConfig({ tls: false }, { ...secret, RINGREDUCE_TLS: '1' }).tls, false);
  assert.equal(resolveConfig({ tls: true }, secret).tls, true);
  assert.throws(() => resolveConfig({}, { ...secret, RINGREDUCE_TLS: 'yes' }), /RINGREDUCE_TLS must be 1 or 0, got "yes"/);
  assert.throws(
    () => resolveConfig({ tls: true }, job),
    /RINGREDUCE_TLS \(ringrun --tls\) needs the job secret RINGREDUCE_SECRET/,
  );
  assert.throws(() => resolveConfig({ tls: true, backend: 'web' }, secret), /RINGREDUCE_TLS: the web backend/);
  // One rank has no link to protect, and needs no secret.
  assert.equal(resolveConfig({ tls: true }, {}).tls, true);
});
