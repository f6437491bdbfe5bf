/**
 * The generations of an elastic job's membership, kept in the launcher's store (elastic mode: the store
 * outlives every rank). The launcher is its only writer: it publishes generation after generation,
 * each the ordered list of workers in the job (a failed worker left out, new ones appended), and
 * bumps the counter of the latest one. A worker waits for the first generation after the one it
 * last ran in that lists it, and takes its rank from its place in the list: ranks are renumbered
 * 0..M-1, survivors keep their order, newcomers come last.
 *
 * Keys, under `elastic/<jobId>/`: `latest` (a counter: the newest generation's number, 0 before
 * the first) and `gen/<n>` (generation n, JSON). Generation n's mesh uses the job id
 * `<jobId>.g<n>`, so it never meets the keys or the peers of another.
 *
 * A worker also says where it is, so that the launcher lists only workers that can still reach
 * it (a host cut off the network ends no process the launcher sees): `ready/<id>` when a new
 * worker first waits for a generation, and `left/<n>/<id>` with `broken/<n>` when a worker of
 * generation n waits for the next one (its job failed, or new workers wait).
 */
import { RingReduceError, TimeoutError } from '../core/errors.js';
import type { Store } from './store.js';

/** One worker: a process the launcher started, known by an id that survives generations. */
export interface Member {
  id: string;
  host: string;
}

export interface Generation {
  number: number;
  members: Member[];
}

/** A worker's place in a generation, as the environment contract would give it. */
export interface Placement {
  rank: number;
  size: number;
  localRank: number;
  localSize: number;
  crossRank: number;
  crossSize: number;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function latestKey(jobId: string): string {
  return `elastic/${jobId}/latest`;
}

function generationKey(jobId: string, n: number): string {
  return `elastic/${jobId}/gen/${n}`;
}

export function readyKey(jobId: string, id: string): string {
  return `elastic/${jobId}/ready/${id}`;
}

export function leftKey(jobId: string, n: number, id: string): string {
  return `elastic/${jobId}/left/${n}/${id}`;
}

/** Set by the first worker of generation n that waits for the next one. */
export function brokenKey(jobId: string, n: number): string {
  return `elastic/${jobId}/broken/${n}`;
}

/** The job id generation `n`'s mesh runs under. */
export function generationJobId(jobId: string, n: number): string {
  return `${jobId}.g${n}`;
}

/** The launcher: makes `generation` the latest (numbers must follow each other: 1, 2, ...). */
export async function publishGeneration(store: Store, jobId: string, generation: Generation): Promise<void> {
  await store.set(generationKey(jobId, generation.number), encoder.encode(JSON.stringify(generation)));
  const latest = await store.add(latestKey(jobId), 1);
  if (latest !== generation.number) {
    throw new RingReduceError(`elastic store: published generation ${generation.number} but the latest is ${latest}`);
  }
}

/** The number of the latest generation (0: none yet), without waiting. */
export function latestGeneration(store: Store, jobId: string): Promise<number> {
  return store.add(latestKey(jobId), 0);
}

/**
 * The first generation after `after` that lists worker `id`, waiting for the launcher to publish
 * it until `deadline` (performance.now()). A generation that leaves out a worker that ran in an
 * earlier one means the launcher gave up on it: that is an error, not something to wait through
 * (a new worker waits through the generations published before the launcher saw it arrive).
 */
export async function awaitGeneration(
  store: Store,
  jobId: string,
  id: string,
  after: number,
  deadline: number,
): Promise<Generation> {
  const here = encoder.encode('1');
  if (after === 0) await store.set(readyKey(jobId, id), here);
  else {
    await store.set(leftKey(jobId, after, id), here);
    await store.set(brokenKey(jobId, after), here);
  }
  let next = after + 1;
  for (;;) {
    const latest = await latestGeneration(store, jobId);
    // Skip generations published meanwhile: only the newest is worth joining.
    if (latest >= next) next = latest;
    const left = deadline - performance.now();
    if (left <= 0) throw new TimeoutError(`elastic worker ${id}: no generation after ${after} listed it in time`);
    const bytes = await store.get(generationKey(jobId, next), left);
    const generation = JSON.parse(decoder.decode(bytes)) as Generation;
    if ((await latestGeneration(store, jobId)) > next) {
      next += 1;
      continue;
    }
    if (!generation.members.some((m) => m.id === id)) {
      // A new worker is listed once the launcher has seen it reach the store: a later generation.
      if (after === 0) {
        next = generation.number + 1;
        continue;
      }
      throw new RingReduceError(
        `elastic worker ${id}: generation ${generation.number} leaves it out; the launcher has given up on it`,
      );
    }
    return generation;
  }
}

/** Worker `id`'s rank, local and cross rank in `generation` (hosts in order of first appearance). */
export function placementOf(generation: Generation, id: string): Placement {
  const { members } = generation;
  const rank = members.findIndex((m) => m.id === id);
  if (rank < 0) throw new RingReduceError(`worker ${id} is not in generation ${generation.number}`);
  const me = members[rank] as Member;
  const hosts = [...new Set(members.map((m) => m.host))];
  const sameHost = members.filter((m) => m.host === me.host);
  return {
    rank,
    size: members.length,
    localRank: sameHost.findIndex((m) => m.id === id),
    localSize: sameHost.length,
    crossRank: hosts.indexOf(me.host),
    crossSize: hosts.length,
  };
}
