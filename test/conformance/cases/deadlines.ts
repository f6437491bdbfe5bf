/**
 * Option 'timeoutMs' of a collective: a rank that does not submit it within the deadline is named
 * in the TimeoutError every rank that did submit rejects with, well before the stall timeout
 * (20 s in process), and the job goes on. Once for a name rank 0 negotiates, once for a cached
 * one (agreed in ready rounds, without rank 0); the late rank's own call then times out naming
 * the others. An invalid deadline is refused at the call.
 */

import type { RingReduce } from '../../../src/api/runtime.js';
import { TimeoutError } from '../../../src/core/errors.js';
import { type ConformanceCase, check, checkError, checkJson, checkRefused, errorOf } from './case.js';

const kDeadlineMs = 150;

/** The TimeoutError of a name that `missing` did not submit and the other ranks did. */
function expected(name: string, size: number, missing: (rank: number) => boolean): string {
  const ranks = Array.from({ length: size }, (_, r) => r);
  const without = ranks.filter(missing).join(', ');
  const with_ = ranks.filter((r) => !missing(r)).join(', ');
  return `Collective '${name}' timed out after ${kDeadlineMs} ms in negotiation: ranks ${without} did not submit it (ranks ${with_} did).`;
}

/**
 * Every rank but the last submits `name` (an allreduce with the deadline); once they have
 * failed, the last one submits it alone. Checks both errors, the time the first took, and an
 * allreduce after.
 */
async function lateRank(rr: RingReduce, rank: number, size: number, name: string): Promise<void> {
  // A memory world holds no handle while it waits (rank 0's deadline timer is unref'd, as a
  // job's sockets keep it alive): this keeps the process alive meanwhile.
  const keepAlive = setInterval(() => {}, 1000);
  try {
    await lateRankChecked(rr, rank, size, name);
  } finally {
    clearInterval(keepAlive);
  }
}

async function lateRankChecked(rr: RingReduce, rank: number, size: number, name: string): Promise<void> {
  const late = size - 1;
  const call = () => rr.allreduce(new Float32Array(2), { name, timeoutMs: kDeadlineMs });
  // The deadline counts from the first rank's submission: start together, so that each rank's
  // own wait is close to it.
  await rr.barrier({ name: `${name}/before` });
  const started = performance.now();
  const early = rank === late ? undefined : await errorOf(call);
  const took = performance.now() - started;
  await rr.barrier({ name: `${name}/after` });
  const tardy = rank === late ? await errorOf(call) : undefined;
  await rr.barrier({ name: `${name}/after-late` });
  const sum = await rr.allreduce(Float32Array.of(1), { name: `${name}/ok`, timeoutMs: 10_000 });

  if (rank === late)
    checkError(
      tardy,
      TimeoutError,
      expected(name, size, (r) => r !== late),
      'the late rank',
    );
  else {
    checkError(
      early,
      TimeoutError,
      expected(name, size, (r) => r === late),
      'the ranks on time',
    );
    // Ranks leave the barrier some milliseconds apart on a loaded machine (4 engine threads on 2
    // cores): the deadline ran from the first rank's submission, which may precede this one's.
    check(took >= kDeadlineMs - 50 && took < 5000, 'the deadline', `passed after ${took.toFixed(0)} ms`);
  }
  checkJson([...sum], [size], 'an allreduce after');
}

const uncached: ConformanceCase = {
  name: 'timeoutMs on a collective: ranks that did not submit it in time are named on every rank that did; the job goes on',
  minRanks: 2,
  run: (rr, rank, size) => lateRank(rr, rank, size, 'deadline/negotiated'),
};

const cached: ConformanceCase = {
  name: 'timeoutMs on a cached collective (agreed without rank 0): the same TimeoutError, naming the rank that did not submit it',
  minRanks: 2,
  async run(rr, rank, size) {
    const name = 'deadline/cached';
    const first = await rr.allreduce(Float32Array.of(rank, 1), { name, timeoutMs: kDeadlineMs });
    checkJson([...first], [(size * (size - 1)) / 2, size], 'its first run, with every rank');
    await lateRank(rr, rank, size, name);
  },
};

const refused: ConformanceCase = {
  name: 'timeoutMs on a collective: a deadline that is not a number of ms in (0, 2^31) is refused at the call',
  async run(rr) {
    for (const bad of [0, -5, 2 ** 31, '100']) {
      await checkRefused(
        `timeoutMs ${JSON.stringify(bad)}`,
        `option 'timeoutMs' must be a number of ms in (0, 2^31), got ${JSON.stringify(bad)}`,
        () => rr.barrier({ name: 'deadline/refused', timeoutMs: bad as number }),
      );
    }
    // Nothing was submitted: the name is free, and unnamed calls are still in step.
    await rr.barrier({ name: 'deadline/refused', timeoutMs: 10_000 });
    await rr.allgatherObject('in step', { timeoutMs: 10_000 });
  },
};

export const deadlineCases: readonly ConformanceCase[] = [uncached, cached, refused];
