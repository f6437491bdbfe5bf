/**
 * The simulated machine: which host each rank is on, what a message costs on each kind of link,
 * and what a reduction costs a rank's CPU.
 *
 * The α-β model per link: a message of b bytes from rank s to rank d occupies s's send port for
 * b·β seconds, reaches d α seconds after it started leaving, and occupies d's receive port for
 * b·β (cut-through: a message on an idle path arrives whole at start + α + b·β). Each rank has one
 * send port and one receive port (its NIC, or its share of the memory bus on one host), which
 * serve messages one at a time in the order they were posted (send) or arrived (receive): a rank
 * cannot send to 100 peers at full bandwidth at once, nor take in 100 messages at once. Links
 * between ranks of one host use `local`, the others `remote`.
 *
 * γ (`reduceSecondsPerByte`) is the rank's CPU time per byte reduced. The simulator charges it
 * when an algorithm runs a reduce kernel, and a rank's next send cannot start before its CPU is
 * free: that is what keeps recursive doubling (reduce, then send on) behind the pipelined ring
 * (reduce one segment while the next is on the wire) at sizes where both move the same bytes.
 */
import { InvalidArgumentError } from '../../core/errors.js';

export interface LinkCost {
  /** Seconds from the first byte leaving to the first byte arriving (plus per-message fixed costs). */
  readonly alpha: number;
  /** Seconds per byte: 1 / bandwidth. */
  readonly beta: number;
}

export interface NetworkParams {
  /** Consecutive ranks per host: ranks r and q share a host when floor(r / n) === floor(q / n). Default: all on one host. */
  ranksPerHost?: number;
  /** Links between ranks of one host. */
  local: LinkCost;
  /** Links between hosts. Default: `local`. */
  remote?: LinkCost;
  /** CPU seconds per byte reduced (γ). Default 0: reductions are free. */
  reduceSecondsPerByte?: number;
}

export interface NetworkModel {
  readonly local: LinkCost;
  readonly remote: LinkCost;
  readonly ranksPerHost: number;
  readonly reduceSecondsPerByte: number;
  hostOf(rank: number): number;
  link(from: number, to: number): LinkCost;
}

/** Validates `params` and fills in the defaults. */
export function createNetworkModel(params: NetworkParams): NetworkModel {
  const local = checkLink('local', params.local);
  const remote = params.remote === undefined ? local : checkLink('remote', params.remote);
  const ranksPerHost = params.ranksPerHost ?? Number.MAX_SAFE_INTEGER;
  if (!Number.isSafeInteger(ranksPerHost) || ranksPerHost < 1) {
    throw new InvalidArgumentError(`ranksPerHost must be a positive integer, got ${ranksPerHost}`);
  }
  const reduceSecondsPerByte = nonNegative('reduceSecondsPerByte', params.reduceSecondsPerByte ?? 0);
  const hostOf = (rank: number) => Math.floor(rank / ranksPerHost);
  return {
    local,
    remote,
    ranksPerHost,
    reduceSecondsPerByte,
    hostOf,
    link: (from, to) => (hostOf(from) === hostOf(to) ? local : remote),
  };
}

function checkLink(name: string, link: LinkCost | undefined): LinkCost {
  if (link === undefined) throw new InvalidArgumentError(`${name} link cost is required`);
  return { alpha: nonNegative(`${name}.alpha`, link.alpha), beta: nonNegative(`${name}.beta`, link.beta) };
}

function nonNegative(name: string, value: number): number {
  if (!Number.isFinite(value) || value < 0) throw new InvalidArgumentError(`${name} must be a finite number >= 0, got ${value}`);
  return value;
}
