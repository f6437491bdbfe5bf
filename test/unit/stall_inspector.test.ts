import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Logger } from '../../src/core/logger.js';
import { type StalledName, StallInspector, type WaitingName, warningMessage } from '../../src/observability/stall_inspector.js';

function setup(warningMs: number, timeoutMs: number) {
  const lines: string[] = [];
  const waiting = new Map<string, WaitingName>();
  const failed: StalledName[][] = [];
  const inspector = new StallInspector({
    warningMs,
    timeoutMs,
    logger: new Logger('[rank 0]', 'warn', (line) => lines.push(line)),
    now: () => performance.now(),
    waiting: () => waiting.entries(),
    onTimeout: (stalled) => {
      failed.push(stalled);
      for (const { name } of stalled) waiting.delete(name);
    },
  });
  const submit = (name: string, size: number, ranks: number[], since = performance.now()) => {
    const requests = new Array(size).fill(undefined);
    for (const r of ranks) requests[r] = {};
    waiting.set(name, { since, requests });
    inspector.update();
  };
  return { inspector, lines, waiting, failed, submit };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('StallInspector', () => {
  it('warns once, naming per rank the tensors it has not submitted, then fails them', async () => {
    const { inspector, lines, failed, submit } = setup(60, 200);
    // Submitted at the same instant, so that both are due together whatever the scheduling.
    const since = performance.now();
    submit('grad/w', 4, [0, 1], since);
    submit('grad/b', 4, [0, 1, 3], since);
    await sleep(120);
    assert.equal(lines.length, 1, lines.join(''));
    assert.match(
      lines[0] ?? '',
      /^ringreduce \[rank 0\] WARN: Stall: 2 tensors have waited 60 ms for some ranks: rank 2 has not submitted 'grad\/w', 'grad\/b'; rank 3 has not submitted 'grad\/w'\. .* they fail after 200 ms\.\n$/,
    );
    assert.equal(failed.length, 0);
    await sleep(200);
    assert.equal(lines.length, 3, 'no second warning; one error line per failed tensor');
    assert.deepEqual(
      failed.flat().map((s) => s.name),
      ['grad/w', 'grad/b'],
    );
    assert.match(
      failed.flat()[0]?.message ?? '',
      /'grad\/w' timed out after 200 ms in negotiation: ranks 2, 3 did not submit it \(ranks 0, 1 did\)/,
    );
    inspector.close();
  });

  it('never arms a timer when nothing waits, and forgets a name that completed', async () => {
    const { inspector, lines, waiting, submit } = setup(50, 0);
    inspector.update();
    submit('fast', 2, [0]);
    waiting.delete('fast'); // rank 1 submitted it in time
    inspector.update();
    await sleep(120);
    assert.deepEqual(lines, []);
    inspector.close();
  });

  it('with the timeout off, says that the tensors wait forever', () => {
    const message = warningMessage([['x', { since: 0, requests: [{}, undefined] }]], 1000, 0);
    assert.match(message, /rank 1 has not submitted 'x'\. .* RINGREDUCE_STALL_TIMEOUT_MS is 0, so they wait forever\.$/);
    const many = Array.from(
      { length: 11 },
      (_, i) => [`t${i}`, { since: 0, requests: [{}, undefined] }] as [string, WaitingName],
    );
    assert.match(warningMessage(many, 1000, 5000), /'t7' and 3 more\./);
  });

  it("states a name's own deadline (option 'timeoutMs'), which replaces the stall timeout", () => {
    const own = warningMessage([['x', { since: 0, requests: [{}, undefined], timeoutMs: 90_000 }]], 1000, 0);
    assert.match(own, /; they fail after 90000 ms\.$/);
    const mixed = warningMessage(
      [
        ['x', { since: 0, requests: [{}, undefined], timeoutMs: 90_000 }],
        ['y', { since: 0, requests: [{}, undefined] }],
      ],
      1000,
      60_000,
    );
    assert.match(mixed, /; they fail at their deadlines\.$/);
  });
});
