/**
 * A process set: a subset of the job's ranks that runs collectives of its own (Horovod's process
 * sets, torch.distributed's groups). Every rank holds the same sets, members or not; a collective
 * with `{ processSet }` involves its members only, ranks numbered inside the set (a root is a
 * rank of the set), and its names are its own: the same name in two sets is two collectives.
 */
import { InvalidArgumentError } from '../core/errors.js';

/**
 * A subset of the job's ranks that runs collectives of its own, made by `rr.addProcessSet(ranks)`
 * or `init({ processSets })` on every rank alike. Pass it as a collective's `processSet` option:
 * only its members call that collective, ranks and roots are numbered inside the set, and names
 * are the set's own. Every rank holds the set, members or not.
 * @example
 * const evens = await rr.addProcessSet([0, 2]);
 * if (evens.includes(rr.rank())) await rr.allreduce(x, { processSet: evens }); // evens.rank() is 0 or 1
 */
export class ProcessSet {
  /** Set by the runtime when the set is removed; collectives with it are refused from then on. */
  #removed = false;

  /** @internal Made by RingReduce.addProcessSet and init({ processSets }). */
  constructor(
    /** The set's id, the same on every rank: 1, 2, ... in the order sets were added (0 is the world). */
    readonly id: number,
    /** The members, job ranks in set order. */
    readonly ranks: readonly number[],
    /** This process's rank in the job. */
    private readonly jobRank: number,
    /** The runtime the set belongs to. */
    readonly owner: object,
  ) {}

  /** Whether job rank `rank` is a member. */
  includes(rank: number): boolean {
    return this.ranks.includes(rank);
  }

  /** This rank's rank inside the set, or -1 if it is not a member. */
  rank(): number {
    return this.ranks.indexOf(this.jobRank);
  }

  /** The number of members. */
  size(): number {
    return this.ranks.length;
  }

  /** Whether `removeProcessSet` removed it: a collective with it is then refused (InvalidArgumentError). */
  get removed(): boolean {
    return this.#removed;
  }

  /** @internal */
  markRemoved(): void {
    this.#removed = true;
  }
}

/** The members of a new set, checked: integers in [0, size), none twice, at least one. */
export function parseSetRanks(ranks: unknown, size: number): number[] {
  if (!Array.isArray(ranks) || ranks.length === 0) {
    throw new InvalidArgumentError(`process set ranks must be a non-empty array of ranks, got ${JSON.stringify(ranks)}`);
  }
  for (const rank of ranks) {
    if (!Number.isInteger(rank) || rank < 0 || rank >= size) {
      throw new InvalidArgumentError(`process set rank ${JSON.stringify(rank)} is not a rank of this job of ${size}`);
    }
  }
  if (new Set(ranks).size !== ranks.length) {
    throw new InvalidArgumentError(`process set ranks [${ranks.join(', ')}] name a rank twice`);
  }
  return [...ranks];
}

/**
 * A new set's members against the job and the sets it has (`existing`: live sets and those being
 * added), as Horovod checks them: a set of every rank, or of the same ranks as another set in any
 * order, is refused (Horovod's global set, and its "duplicate process set" error; a set of the
 * same members is the same group of processes, whatever numbering it gives them).
 */
export function checkNewMembers(
  members: readonly number[],
  size: number,
  existing: Iterable<{ readonly id: number; readonly ranks: readonly number[] }>,
): void {
  const listed = `[${members.join(', ')}]`;
  if (members.length === size) {
    throw new InvalidArgumentError(
      `process set ranks ${listed} are every rank of the job: a collective without option 'processSet' runs on all of them (Horovod refuses such a set too, as a duplicate of its global set)`,
    );
  }
  const key = membersKey(members);
  for (const set of existing) {
    if (membersKey(set.ranks) === key) {
      throw new InvalidArgumentError(
        `process set ranks ${listed} are the members of process set ${set.id} ([${set.ranks.join(', ')}]) already: use that set, or remove it first (Horovod refuses a duplicate process set, comparing ranks in any order)`,
      );
    }
  }
}

/** Members in ascending order, as text: two sets of the same ranks in any order have the same key. */
function membersKey(ranks: readonly number[]): string {
  return [...ranks].sort((a, b) => a - b).join(',');
}

/**
 * Option 'processSet' of a collective: undefined for the world, or a set of this runtime that
 * this rank is a member of and that has not been removed.
 */
export function parseProcessSet(value: unknown, owner: object, jobRank: number): ProcessSet | undefined {
  if (value === undefined) return undefined;
  if (!(value instanceof ProcessSet) || value.owner !== owner) {
    throw new InvalidArgumentError(
      `option 'processSet' must be a ProcessSet of this runtime (from addProcessSet), got ${String(value)}`,
    );
  }
  if (value.removed) throw new InvalidArgumentError(`process set ${value.id} was removed`);
  if (!value.includes(jobRank)) {
    throw new InvalidArgumentError(
      `rank ${jobRank} is not in process set ${value.id} (ranks [${value.ranks.join(', ')}]): only its members call its collectives`,
    );
  }
  return value;
}
