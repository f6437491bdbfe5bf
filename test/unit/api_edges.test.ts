/**
 * The edges of the module API (api/default_runtime.ts) and of errors: calls before init()
 * reject rather than throw, a second init() with other options is refused naming the option,
 * every error class has a stable code that survives the engine thread, rr.backend() and
 * rr.version say what runs, and the engine's worker is started without the main program's
 * entry flags (platform/node/engine_worker.ts); a call cut off by shutdown() is named.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { describe, it } from 'node:test';
import {
  fromErrorRecord,
  InvalidArgumentError,
  kErrorCodes,
  MismatchError,
  PeerFailureError,
  ProtocolError,
  RingReduceError,
  ShutdownError,
  TimeoutError,
  toErrorRecord,
} from '../../src/core/errors.js';
import * as rr from '../../src/index.js';
import { workerExecArgv } from '../../src/platform/node/engine_worker.js';
import { startMemoryWorld } from '../helpers/local_engine.js';

const kPackageVersion = (
  JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

describe('before init()', () => {
  it('every collective returning a promise rejects with ShutdownError instead of throwing', async () => {
    const t = new Float32Array(4);
    const calls: [string, () => Promise<unknown>][] = [
      ['allreduce', () => rr.allreduce(t)],
      ['allgather', () => rr.allgather(t)],
      ['broadcast', () => rr.broadcast(t)],
      ['reducescatter', () => rr.reducescatter(t)],
      ['alltoall', () => rr.alltoall(t)],
      ['reduce', () => rr.reduce(t)],
      ['gather', () => rr.gather(t)],
      ['scatter', () => rr.scatter(t)],
      ['send', () => rr.send(t, { to: 0 })],
      ['recv', () => rr.recv(t, { from: 0 })],
      ['allgatherObject', () => rr.allgatherObject(1)],
      ['broadcastObject', () => rr.broadcastObject(1)],
      ['gatherObject', () => rr.gatherObject(1)],
      ['scatterObject', () => rr.scatterObject([1])],
      ['groupedAllreduce', () => rr.groupedAllreduce([t])],
      ['groupedAllgather', () => rr.groupedAllgather([t])],
      ['groupedReducescatter', () => rr.groupedReducescatter([t])],
      ['join', () => rr.join()],
      ['addProcessSet', () => rr.addProcessSet([0])],
      ['barrier', () => rr.barrier()],
      ['monitoredBarrier', () => rr.monitoredBarrier({ timeoutMs: 10 })],
      ['groupedBroadcast', () => rr.groupedBroadcast([t])],
    ];
    for (const [name, call] of calls) {
      let promise: Promise<unknown> | undefined;
      assert.doesNotThrow(() => {
        promise = call();
      }, `${name} threw synchronously`);
      await assert.rejects(promise as Promise<unknown>, { name: 'ShutdownError', code: 'ERR_RR_SHUTDOWN' }, name);
    }
    // The ...Sync functions and the accessors throw, as a synchronous function does.
    assert.throws(() => rr.allreduceSync(t), ShutdownError);
    assert.throws(() => rr.rank(), ShutdownError);
    assert.throws(() => rr.backend(), ShutdownError);
  });
});

describe('init()', () => {
  it('again with the same or no options returns the job; with another option it rejects naming it', async () => {
    await rr.init({ logLevel: 'error', stallWarningMs: 0 });
    try {
      await rr.init();
      await rr.init({ logLevel: 'error' });
      await assert.rejects(rr.init({ logLevel: 'debug' }), (error: Error) => {
        assert.ok(error instanceof InvalidArgumentError);
        assert.equal((error as InvalidArgumentError).code, 'ERR_RR_INVALID_ARGUMENT');
        assert.match(error.message, /init option 'logLevel' is "debug", but the job was joined with "error"/);
        return true;
      });
      await assert.rejects(
        rr.init({ ioTimeoutMs: 5000 }),
        /init option 'ioTimeoutMs' is 5000, but the job was joined with it unset/,
      );
      assert.equal(rr.size(), 1);
      assert.equal(rr.backend(), 'solo');
      assert.equal(rr.runtime().backend(), 'solo');
      assert.equal(rr.version, kPackageVersion);
      assert.equal(rr.runtime().version, kPackageVersion);
    } finally {
      await rr.shutdown();
    }
    // After shutdown() the options of the next init() are free again.
    await rr.init({ logLevel: 'warn' });
    await rr.shutdown();
  });

  it('not awaited: a call before it finished says so; one after shutdown() says that', async () => {
    const joining = rr.init({ logLevel: 'error' });
    assert.throws(() => rr.rank(), /^ShutdownError: init\(\) has not finished: await rr\.init\(\)/);
    await assert.rejects(rr.allreduce(new Float32Array(1)), /init\(\) has not finished/);
    await joining;
    assert.equal(rr.rank(), 0);
    await rr.shutdown();
    assert.throws(() => rr.rank(), /ringreduce was shut down: call init\(\) again/);
  });
});

describe('shutdown()', () => {
  it('rejects the collectives still pending with a ShutdownError naming each', async () => {
    const [zero, one] = startMemoryWorld(2);
    const pending = (one as rr.RingReduce).allreduce(new Float32Array(2), { name: 'grad/layer1' });
    const rejected = assert.rejects(pending, {
      name: 'ShutdownError',
      message: "ringreduce was shut down while allreduce 'grad/layer1' was pending",
    });
    await Promise.all([zero?.shutdown(), one?.shutdown()]);
    await rejected;
  });
});

describe('error codes', () => {
  const classes = [
    [RingReduceError, 'ERR_RR_ERROR'],
    [InvalidArgumentError, 'ERR_RR_INVALID_ARGUMENT'],
    [MismatchError, 'ERR_RR_MISMATCH'],
    [PeerFailureError, 'ERR_RR_PEER_FAILURE'],
    [TimeoutError, 'ERR_RR_TIMEOUT'],
    [ShutdownError, 'ERR_RR_SHUTDOWN'],
    [ProtocolError, 'ERR_RR_PROTOCOL'],
  ] as const;

  it('every class has its own stable code, kept across a record and a structured clone', () => {
    assert.equal(new Set(Object.values(kErrorCodes)).size, classes.length);
    for (const [Class, code] of classes) {
      const error = new Class('x');
      assert.equal(error.code, code, Class.name);
      const back = fromErrorRecord(structuredClone(toErrorRecord(error)));
      assert.equal(back.code, code, Class.name);
      assert.equal(back.name, error.name);
    }
    assert.equal(fromErrorRecord(toErrorRecord(new PeerFailureError('gone', 3))).code, 'ERR_RR_PEER_FAILURE');
  });

  it('the package exports the table of codes, so callers compare against it rather than literals', () => {
    assert.deepEqual(rr.kErrorCodes, kErrorCodes);
    assert.equal(rr.kErrorCodes.MismatchError, new rr.MismatchError('x').code);
  });

  it("an error from the engine's thread arrives with its code", async () => {
    // A port nothing listens on: rank 1 never reaches the store and times out in the engine.
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await assert.rejects(
      rr.RingReduce.init({ rank: 1, size: 2, storeAddress: `127.0.0.1:${port}`, startTimeoutMs: 300, logLevel: 'error' }),
      { name: 'TimeoutError', code: 'ERR_RR_TIMEOUT' },
    );
  });
});

describe("the engine worker's flags", () => {
  it("leave out the main program's entry, with its value, and nothing else", () => {
    assert.equal(workerExecArgv([]), undefined);
    assert.equal(workerExecArgv(['--enable-source-maps', '--max-old-space-size=512']), undefined);
    assert.deepEqual(workerExecArgv(['--input-type=module', '-e', 'code', '--enable-source-maps']), ['--enable-source-maps']);
    assert.deepEqual(workerExecArgv(['--input-type', 'module', '--eval=code']), []);
    assert.deepEqual(workerExecArgv(['-p', '1+1', '--conditions', 'x']), ['--conditions', 'x']);
    assert.deepEqual(workerExecArgv(['--test', '--test-reporter=tap', '--watch']), []);
  });
});
