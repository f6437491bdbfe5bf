/**
 * What ringrun concludes from the ranks' rendezvous (start_up.ts): a rank that exited with code
 * 0 is checked against the store before the job is failed, and the start-up timeout names the
 * ranks that did not call init(), or else those that did not finish connecting.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { StartUp } from '../../src/launcher/start_up.js';

function exit(rank: number, code: number) {
  return { rank, pid: 10 + rank, code, signal: null };
}

/** A StartUp whose store holds the addresses of `published`; resolves `failed` when it fails a rank. */
function startUp(published: number[]) {
  const failed: number[] = [];
  let asked = Promise.resolve();
  const tracker = new StartUp({
    size: 3,
    calledInit: (rank) => {
      const answer = Promise.resolve(published.includes(rank));
      asked = answer.then(() => undefined);
      return answer;
    },
    onExitedBeforeInit: (rank) => failed.push(rank),
  });
  return {
    tracker,
    failed,
    settled: async () => {
      await asked;
      await Promise.resolve();
    },
  };
}

describe('start-up as the store shows it', () => {
  it('fails a rank that exited with code 0 without its address in the store, once the store is reached', async () => {
    const { tracker, failed, settled } = startUp([0, 1]);
    tracker.onExit(exit(2, 0));
    await settled();
    assert.deepEqual(failed, [], 'not before the store is reached: nothing is known yet');
    tracker.onStore();
    await settled();
    assert.deepEqual(failed, [2]);
  });

  it('leaves a rank whose address is in the store, a failed exit, and any exit once connected', async () => {
    const { tracker, failed, settled } = startUp([0, 1, 2]);
    tracker.onStore();
    tracker.onExit(exit(2, 0));
    tracker.onExit(exit(1, 3));
    await settled();
    tracker.onConnected();
    tracker.onExit(exit(0, 0));
    await settled();
    assert.deepEqual(failed, []);
  });

  it('names the ranks that did not call init(), else those that did not finish connecting', () => {
    const { tracker } = startUp([]);
    assert.equal(tracker.late(), undefined, 'unknown before the store is reached');
    tracker.onStore();
    tracker.onInit(0);
    tracker.onInit(2);
    tracker.onFinished(0);
    assert.deepEqual(tracker.late(), [{ rank: 1, why: 'did not call init()' }]);
    assert.equal(tracker.exitNote(1), ' before calling init()');
    assert.equal(tracker.exitNote(2), '');
    tracker.onInit(1);
    assert.deepEqual(
      tracker.late(),
      [1, 2].map((rank) => ({ rank, why: 'did not finish connecting' })),
    );
    tracker.onConnected();
    assert.equal(tracker.late(), undefined);
  });
});
