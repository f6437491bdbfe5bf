import assert from 'node:assert/strict';
import { test } from 'node:test';
import { resolveConfig } from '../../src/core/config.js';
import { InvalidArgumentError } from '../../src/core/errors.js';

test('no environment: a job of size 1', () => {
  const c = resolveConfig({}, {});
  assert.equal(c.rank, 0);
  assert.equal(c.size, 1);
  assert.ok(Object.isFrozen(c));
});

test('RINGREDUCE_* wins over Open MPI, which wins over torchrun', () => {
  const env = {
    RINGREDUCE_RANK: '1',
    RINGREDUCE_SIZE: '3',
    RINGREDUCE_STORE_ADDR: 'node0:29500',
    OMPI_COMM_WORLD_RANK: '2',
    OMPI_COMM_WORLD_SIZE: '4',
    RANK: '0',
    WORLD_SIZE: '5',
  };
  const c = resolveConfig({}, env);
  assert.deepEqual([c.rank, c.size, c.storeHost, c.storePort], [1, 3, 'node0', 29500]);
  const ompi = resolveConfig({}, { ...env, RINGREDUCE_RANK: undefined, RINGREDUCE_SIZE: undefined });
  assert.deepEqual([ompi.rank, ompi.size], [2, 4]);
});

test('torchrun variables: rank, size and the store at MASTER_ADDR:MASTER_PORT', () => {
  const c = resolveConfig(
    {},
    { RANK: '2', WORLD_SIZE: '4', LOCAL_RANK: '0', LOCAL_WORLD_SIZE: '2', MASTER_ADDR: '10.0.0.1', MASTER_PORT: '1234' },
  );
  assert.deepEqual([c.rank, c.size, c.localRank, c.localSize, c.storeHost, c.storePort], [2, 4, 0, 2, '10.0.0.1', 1234]);
});

test('options win over the environment and are validated by name', () => {
  const c = resolveConfig({ ioTimeoutMs: 500 }, { RINGREDUCE_IO_TIMEOUT_MS: '9000' });
  assert.equal(c.ioTimeoutMs, 500);
  assert.throws(() => resolveConfig({ ioTimeoutMs: -1 }, {}), /init option 'ioTimeoutMs'/);
  assert.throws(() => resolveConfig({ bogus: 1 } as never, {}), InvalidArgumentError);
});

test('bad environment values and a missing store address are clear errors', () => {
  assert.throws(
    () => resolveConfig({}, { RINGREDUCE_IO_TIMEOUT_MS: 'soon' }),
    /RINGREDUCE_IO_TIMEOUT_MS="soon" must be an integer >= 1/,
  );
  assert.throws(() => resolveConfig({}, { RINGREDUCE_START_TIMEOUT_MS: '0' }), /RINGREDUCE_START_TIMEOUT_MS="0"/);
  assert.throws(() => resolveConfig({}, { RINGREDUCE_RANK: '0', RINGREDUCE_SIZE: '2' }), /RINGREDUCE_STORE_ADDR/);
  assert.throws(() => resolveConfig({}, { RINGREDUCE_RANK: '2', RINGREDUCE_SIZE: '2' }), /rank 2 is out of range/);
  assert.throws(() => resolveConfig({ storeAddress: 'nohost' }, {}), /store address must be host:port/);
});

test('RINGREDUCE_HIERARCHICAL_ALLREDUCE and _ALLGATHER: auto by default, on, off, Horovod-style 1 and 0; options win', () => {
  const c = resolveConfig({}, {});
  assert.deepEqual([c.hierarchicalAllreduce, c.hierarchicalAllgather], ['auto', 'auto']);
  const env = { RINGREDUCE_HIERARCHICAL_ALLREDUCE: '1', RINGREDUCE_HIERARCHICAL_ALLGATHER: 'off' };
  const e = resolveConfig({}, env);
  assert.deepEqual([e.hierarchicalAllreduce, e.hierarchicalAllgather], ['on', 'off']);
  assert.equal(resolveConfig({}, { RINGREDUCE_HIERARCHICAL_ALLREDUCE: '0' }).hierarchicalAllreduce, 'off');
  assert.equal(resolveConfig({ hierarchicalAllreduce: 'auto' }, env).hierarchicalAllreduce, 'auto');
  assert.throws(
    () => resolveConfig({}, { RINGREDUCE_HIERARCHICAL_ALLGATHER: 'yes' }),
    (e: unknown) =>
      e instanceof InvalidArgumentError &&
      /RINGREDUCE_HIERARCHICAL_ALLGATHER must be one of auto, on, off \(or 0, 1\), got "yes"/.test(e.message),
  );
  assert.throws(() => resolveConfig({ hierarchicalAllreduce: 'always' as 'on' }, {}), /init option 'hierarchicalAllreduce'/);
});

test('the ready exchange: auto by default, either mode from RINGREDUCE_READY_EXCHANGE or the option, anything else refused', () => {
  assert.equal(resolveConfig({}, {}).readyExchange, 'auto');
  assert.equal(resolveConfig({}, { RINGREDUCE_READY_EXCHANGE: 'recursive-doubling' }).readyExchange, 'recursive-doubling');
  assert.equal(
    resolveConfig({ readyExchange: 'all-to-all' }, { RINGREDUCE_READY_EXCHANGE: 'recursive-doubling' }).readyExchange,
    'all-to-all',
  );
  assert.throws(
    () => resolveConfig({}, { RINGREDUCE_READY_EXCHANGE: 'tree' }),
    /RINGREDUCE_READY_EXCHANGE must be one of auto, all-to-all, recursive-doubling/,
  );
  assert.throws(() => resolveConfig({ readyExchange: 'tree' } as never, {}), /init option 'readyExchange'/);
});

test('the cost model: measured by default, off, or figures from RINGREDUCE_COST_MODEL or the option; anything else refused', () => {
  assert.equal(resolveConfig({}, {}).costModel, 'measure');
  assert.equal(resolveConfig({}, { RINGREDUCE_COST_MODEL: 'off' }).costModel, 'off');
  assert.deepEqual(resolveConfig({}, { RINGREDUCE_COST_MODEL: 'alpha=20e-6, beta=1e-10' }).costModel, {
    alpha: 20e-6,
    beta: 1e-10,
  });
  assert.deepEqual(resolveConfig({ costModel: { gamma: 3e-10 } }, { RINGREDUCE_COST_MODEL: 'off' }).costModel, { gamma: 3e-10 });
  for (const bad of ['on', 'alpha', 'alpha=-1', 'delta=1', 'beta=1=2', 'alpha=Infinity']) {
    assert.throws(
      () => resolveConfig({}, { RINGREDUCE_COST_MODEL: bad }),
      /RINGREDUCE_COST_MODEL must be measure, off, or figures/,
      bad,
    );
  }
  assert.throws(() => resolveConfig({ costModel: { alpha: -1 } }, {}), /init option 'costModel/);
});

test("backend 'web' and the store URL: RINGREDUCE_STORE_URL or storeUrl (ws:// or wss://) instead of a store address", () => {
  const env = { RINGREDUCE_RANK: '1', RINGREDUCE_SIZE: '3', RINGREDUCE_BACKEND: 'web', RINGREDUCE_STORE_URL: 'wss://h:8/s?t=1' };
  const c = resolveConfig({}, env);
  assert.deepEqual([c.backend, c.storeUrl, c.storePort], ['web', 'wss://h:8/s?t=1', 0]);
  assert.equal(resolveConfig({ storeUrl: 'ws://a:1' }, env).storeUrl, 'ws://a:1');
  assert.throws(
    () => resolveConfig({}, { ...env, RINGREDUCE_STORE_URL: 'http://h:8' }),
    /RINGREDUCE_STORE_URL must be a ws:\/\/ or wss:\/\/ URL/,
  );
  assert.throws(() => resolveConfig({ storeUrl: 'h:8' }, env), /init option 'storeUrl'/);
  assert.throws(
    () => resolveConfig({}, { ...env, RINGREDUCE_STORE_URL: undefined }),
    /needs the rendezvous address.*RINGREDUCE_STORE_URL/,
  );
  assert.throws(
    () => resolveConfig({}, { ...env, RINGREDUCE_BACKEND: 'webrtc' }),
    /RINGREDUCE_BACKEND must be one of tcp, mpi, auto, web, got "webrtc"/,
  );
});
