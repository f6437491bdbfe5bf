/**
 * Which rank ringrun names when a job fails: the error a rank printed (rank_error.ts, read from
 * Node's own output for an uncaught error) and the root cause among the failed ranks
 * (failure_cause.ts).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type FailedRank, rootCause } from '../../src/launcher/failure_cause.js';
import { failureReport } from '../../src/launcher/failure_report.js';
import { findRankError, linesToShow } from '../../src/launcher/rank_error.js';

/** What Node 20 prints for an uncaught Error thrown at the top level of a module. */
const kUncaught = [
  'iteration 4',
  'file:///app/train.js:5',
  "  if (rank === 1) throw new Error('bad batch');",
  '                   ^',
  '',
  'Error: bad batch',
  '    at file:///app/train.js:5:20',
  '    at ModuleJob.run (node:internal/modules/esm/module_job:325:25)',
  '    at async ModuleLoader.import (node:internal/modules/esm/loader:606:24)',
  '    at async asyncRunEntryPointWithESMLoader (node:internal/modules/run_main:117:5)',
  '',
  'Node.js v20.20.2',
];

/** A rank whose allreduce rejected because rank 1 failed. */
const kVictim = [
  'file:///app/node_modules/ringreduce/dist/src/core/errors.js:82',
  '        return new PeerFailureError(record.message, record.peerRank);',
  '               ^',
  '',
  'PeerFailureError: rank 1 (127.0.0.1:43923): closed the connection [send link]',
  '    at fromErrorRecord (file:///app/node_modules/ringreduce/dist/src/core/errors.js:82:16)',
  '    at EngineClient.dispatch (file:///app/node_modules/ringreduce/dist/src/api/engine_client.js:300:33)',
  '    at EngineClient.dispatchAll (file:///app/node_modules/ringreduce/dist/src/api/engine_client.js:276:18)',
  '    at MessagePort.<anonymous> (file:///app/node_modules/ringreduce/dist/src/api/engine_client.js:114:47)',
  '    at [nodejs.internal.kHybridDispatch] (node:internal/event_target:831:20)',
  '    at MessagePort.<anonymous> (node:internal/per_context/messageport:23:28) {',
  "  code: 'ERR_RR_PEER_FAILURE',",
  '  peerRank: 1',
  '}',
  '',
  'Node.js v20.20.2',
];

describe("a rank's error, read from its output", () => {
  it('is the header of the last uncaught error, up to its first frames', () => {
    const error = findRankError(kUncaught);
    assert.deepEqual(error, { summary: 'Error: bad batch', name: 'Error', start: 5, end: 10 });
    assert.deepEqual(linesToShow(kUncaught, error, 10), kUncaught.slice(0, 10));
    // Fewer lines: the error and its first frames are kept, not what comes before them.
    assert.deepEqual(linesToShow(kUncaught, error, 3), kUncaught.slice(5, 8));
  });

  it('of a PeerFailureError says whom the rank blames (its peerRank)', () => {
    const error = findRankError(kVictim);
    assert.equal(error?.name, 'PeerFailureError');
    assert.equal(error?.peerRank, 1);
    assert.equal(error?.summary, 'PeerFailureError: rank 1 (127.0.0.1:43923): closed the connection [send link]');
    // Its first five frames, not the properties and Node's version after them.
    const shown = linesToShow(kVictim, error, 10);
    assert.deepEqual(shown, kVictim.slice(0, 10));
  });

  it('keeps a message of several lines, a cause and Node codes apart from the header', () => {
    const multi = ['Error: line one', 'Details: two', '    at f (x.js:1:1)'];
    assert.equal(findRankError(multi)?.summary, 'Error: line one');
    const withCause = ['Error: outer', '    at f (x.js:1:1) {', '  [cause]: TypeError: inner', '      at g (x.js:2:2)', '}'];
    assert.equal(findRankError(withCause)?.summary, 'Error: outer');
    // Without the brace that opens the properties after the last frame.
    assert.deepEqual(linesToShow(withCause, findRankError(withCause), 10), ['Error: outer', '    at f (x.js:1:1)']);
    const coded = ['TypeError [ERR_INVALID_ARG_TYPE]: The "path" argument must be of type string', '    at open (node:fs:1:1)'];
    assert.equal(findRankError(coded)?.name, 'TypeError');
    assert.equal(findRankError(['MyFailure: custom', '    at f (x.js:1:1)'])?.name, 'MyFailure');
  });

  it('is none when the output holds no stack: the last lines are shown as they are', () => {
    const lines = ['line 1', 'line 2', 'about to fail'];
    assert.equal(findRankError(lines), undefined);
    assert.equal(findRankError(['just a string', '(Use `node --trace-uncaught ...` to show where)']), undefined);
    assert.deepEqual(linesToShow(lines, undefined, 2), ['line 2', 'about to fail']);
  });
});

function failedRank(rank: number, lines: readonly string[], signal: NodeJS.Signals | null = null): FailedRank {
  const error = findRankError(lines);
  return {
    exit: { rank, pid: 100 + rank, code: signal === null ? 1 : null, signal },
    lastLines: linesToShow(lines, error, 10),
    ...(error !== undefined && { error }),
  };
}

const victimOf = (peer: number) => kVictim.map((line) => line.replace('peerRank: 1', `peerRank: ${peer}`));

describe('the root cause among the failed ranks', () => {
  it('is not a rank that died of a peer whose exit may still come; is that peer once it failed', () => {
    const victim = failedRank(2, kVictim);
    assert.equal(
      rootCause([victim], () => true),
      undefined,
    );
    const cause = failedRank(1, kUncaught);
    assert.equal(
      rootCause([victim, cause], () => true),
      cause,
    );
  });

  it('is the first rank that failed on its own: by its own error, a signal, or without an error printed', () => {
    const killed = failedRank(3, ['iteration 30'], 'SIGKILL');
    assert.equal(
      rootCause([failedRank(0, victimOf(3)), killed, failedRank(1, kUncaught)], () => true),
      killed,
    );
  });

  it('is the rank that died of a peer when that peer does not fail (exited cleanly, stopped, or the wait ended)', () => {
    const victim = failedRank(0, kVictim);
    assert.equal(
      rootCause([victim], () => false),
      victim,
    );
  });

  it('is the first to exit when every failed rank blames another failed one (a link cut between them)', () => {
    const zero = failedRank(0, kVictim);
    const one = failedRank(1, victimOf(0));
    assert.equal(
      rootCause([zero, one], () => true),
      zero,
    );
  });

  it('is reported with its error and its lines up to it', () => {
    const report = failureReport(failedRank(1, kUncaught));
    assert.deepEqual(report.slice(0, 3), [
      'job failed: rank 1 (pid 101) exited with code 1',
      'error of rank 1: Error: bad batch',
      'last 10 lines of rank 1, up to its error:',
    ]);
    assert.equal(report.at(-5), '  [1] Error: bad batch');
  });
});
