/**
 * The MPI backend's TypeScript side, without MPI: MpiTransport over a fake addon (tag mapping,
 * error translation, peer failure, the close barrier), the native collectives' dtype and op
 * codes, and the loader's message when the addon is missing. The transport contract runs over
 * real MPI in test/multiprocess/transport_contract_mpi.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { kDTypes } from '../../src/core/dtypes.js';
import { InvalidArgumentError, PeerFailureError, ProtocolError, TimeoutError } from '../../src/core/errors.js';
import type { TypedArray } from '../../src/core/types.js';
import { loadMpiBinding, tryLoadMpiBinding } from '../../src/transport/mpi/loader.js';
import { MpiTransport } from '../../src/transport/mpi/mpi_transport.js';
import {
  type CloseResult,
  type CommOptions,
  kDTypeCodes,
  kReduceOpCodes,
  type MpiBinding,
  type MpiWorldInfo,
  type NativeComm,
} from '../../src/transport/mpi/native_binding.js';

type Call = [string, ...unknown[]];

/** A Comm whose operations settle when the test says so. */
class FakeComm implements NativeComm {
  readonly calls: Call[] = [];
  next: () => Promise<void> = () => Promise.resolve();
  closedWith: number | undefined;
  constructor(readonly options: CommOptions) {}
  send(peer: number, tag: number, data: Uint8Array) {
    this.calls.push(['send', peer, tag, data.byteLength]);
    return this.next();
  }
  recv(peer: number, tag: number, into: Uint8Array) {
    this.calls.push(['recv', peer, tag, into.byteLength]);
    return this.next();
  }
  sendControl(peer: number, payload: Uint8Array) {
    this.calls.push(['control', peer, payload.byteLength]);
    return this.next();
  }
  allreduce(buf: TypedArray, dtype: number, op: number) {
    this.calls.push(['allreduce', buf.length, dtype, op]);
    return this.next();
  }
  allgatherv(buf: TypedArray, dtype: number, counts: readonly number[]) {
    this.calls.push(['allgatherv', buf.length, dtype, [...counts]]);
    return this.next();
  }
  bcast(buf: TypedArray, dtype: number, root: number) {
    this.calls.push(['bcast', buf.length, dtype, root]);
    return this.next();
  }
  close(timeoutMs: number): Promise<CloseResult> {
    this.closedWith = timeoutMs;
    return Promise.resolve({ clean: true, reason: '' });
  }
}

function nativeError(code: string, message = code): Error {
  return Object.assign(new Error(message), { code });
}

function setup(world: Partial<MpiWorldInfo> = {}) {
  let comm: FakeComm | undefined;
  const aborts: string[] = [];
  const binding = {
    Comm: class {
      constructor(options: CommOptions) {
        comm = new FakeComm(options);
        // biome-ignore lint/correctness/noConstructorReturn: the fake hands back its spy
        return comm;
      }
    },
    abort: (message: string) => {
      aborts.push(message);
    },
    dtypes: kDTypeCodes,
    reduceOps: kReduceOpCodes,
  } as unknown as MpiBinding;
  const info: MpiWorldInfo = { rank: 1, size: 3, threadLevel: 2, tagUpperBound: 99, library: 'fake', libraryPath: '', ...world };
  const transport = new MpiTransport(binding, info, { ioTimeoutMs: 1000 });
  return { transport, comm: comm as FakeComm, aborts };
}

test('tags are taken modulo MPI_TAG_UB + 1; a receive lands in a Uint8Array only', async () => {
  const { transport, comm } = setup();
  await assert.rejects(transport.recv(0, 1, new Float32Array(1) as never), /must be a Uint8Array/);
  await transport.send(2, 250, new Uint8Array(4));
  await transport.recv(0, 0xffff_ffff, new Uint8Array(2));
  assert.deepEqual(comm.calls, [
    ['send', 2, 50, 4],
    ['recv', 0, 0xffff_ffff % 100, 2],
  ]);
});

test('native failures become ringreduce errors; a timeout or an MPI error fails the peer once', async () => {
  const { transport, comm } = setup();
  const failures: [number, string][] = [];
  transport.onPeerFailure((peer, error) => failures.push([peer, error.message]));
  comm.next = () => Promise.reject(nativeError('ESHORT', 'the message has 3 bytes, expected 4'));
  await assert.rejects(transport.recv(0, 5, new Uint8Array(4)), (e: Error) => {
    assert.ok(e instanceof ProtocolError);
    assert.equal(e.message, 'recv from rank 0 with tag 5: the message has 3 bytes, expected 4');
    return true;
  });
  assert.equal(failures.length, 0, 'a wrong length does not break the link');
  comm.next = () => Promise.reject(nativeError('ETIMEDOUT'));
  await assert.rejects(transport.recv(0, 6, new Uint8Array(1)), (e: Error) => {
    assert.ok(e instanceof TimeoutError);
    assert.match(e.message, /^recv from rank 0 with tag 6 did not complete within 1000 ms/);
    return true;
  });
  assert.equal(failures.length, 1);
  assert.equal(failures[0]?.[0], 0);
  await assert.rejects(transport.send(0, 7, new Uint8Array(1)), (e: Error) => e instanceof PeerFailureError && e.peerRank === 0);
  comm.next = () => Promise.reject(nativeError('EMPI', 'MPI_ERR_OTHER'));
  await assert.rejects(transport.sendControl(2, new Uint8Array(1)), (e: Error) => {
    assert.ok(e instanceof PeerFailureError);
    assert.equal(e.peerRank, 2);
    return true;
  });
  assert.deepEqual(
    failures.map(([peer]) => peer),
    [0, 2],
  );
  // A handler added later still hears about both.
  const late: number[] = [];
  transport.onPeerFailure((peer) => late.push(peer));
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(late, [0, 2]);
});

test('an error receiving control messages fails the peer, once', () => {
  const { transport, comm } = setup();
  const failed: number[] = [];
  transport.onPeerFailure((peer) => failed.push(peer));
  comm.options.onLinkError(2, 'MPI_ERR_TRUNCATE');
  comm.options.onLinkError(2, 'again');
  assert.deepEqual(failed, [2]);
});

test('close waits for the barrier up to the I/O timeout, and skips it once a peer failed', async () => {
  const healthy = setup();
  await healthy.transport.close();
  assert.equal(healthy.comm.closedWith, 1000);

  const broken = setup();
  broken.comm.options.onLinkError(0, 'gone');
  await broken.transport.close();
  assert.equal(broken.comm.closedWith, 0);
});

test('native collectives: every dtype and op by its code; average only for floats', async () => {
  const { transport, comm } = setup();
  const native = transport.native;
  assert.equal(native.supports('allreduce', 'int64', 'sum'), true);
  assert.equal(native.supports('allreduce', 'int32', 'average'), false);
  assert.equal(native.supports('allreduce', 'float32', 'average'), true);
  await native.allreduce(new BigUint64Array(3), 'product');
  await native.allgather(new Int16Array(5), [2, 0, 3]);
  await native.broadcast(new Float64Array(2), 2);
  assert.deepEqual(comm.calls, [
    ['allreduce', 3, kDTypes.indexOf('uint64'), kReduceOpCodes.indexOf('product')],
    ['allgatherv', 5, kDTypes.indexOf('int16'), [2, 0, 3]],
    ['bcast', 2, kDTypes.indexOf('float64'), 2],
  ]);
  assert.deepEqual(kDTypeCodes, kDTypes, 'the addon numbers dtypes by their wire codes');
  comm.next = () => Promise.reject(nativeError('EMPI', 'MPI_ERR_TRUNCATE: message truncated'));
  await assert.rejects(
    native.broadcast(new Float32Array(1), 0),
    /MPI broadcast from rank 0 of 1 float32 failed in MPI: MPI_ERR_TRUNCATE/,
  );
});

test('a collective past its deadline aborts the MPI job with a message naming it', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const { transport, comm, aborts } = setup({ rank: 0, size: 2 });
  comm.next = () => new Promise<void>(() => {});
  void transport.native.allreduce(new Float32Array(250_000), 'sum');
  await Promise.resolve();
  t.mock.timers.tick(1000 + 99);
  assert.deepEqual(aborts, []);
  t.mock.timers.tick(1);
  assert.equal(aborts.length, 1);
  assert.match(aborts[0] as string, /^rank 0 of 2: the MPI allreduce \(sum\) of 250000 float32 did not finish within 1100 ms/);
});

test('without the addon, asking for MPI says what to install', () => {
  const missing = '/nonexistent/ringreduce_mpi.node';
  assert.equal(tryLoadMpiBinding(missing), undefined);
  assert.throws(
    () => loadMpiBinding(missing),
    (e: Error) =>
      e instanceof InvalidArgumentError &&
      e.message.includes(missing) &&
      e.message.includes('apt-get install openmpi-bin libopenmpi-dev') &&
      e.message.includes('RINGREDUCE_BACKEND=tcp'),
  );
});
