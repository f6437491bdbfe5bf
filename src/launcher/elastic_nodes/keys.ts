/**
 * The rendezvous of the elastic per-node mode, in the store the hosting launcher serves at the
 * endpoint. The launchers (agents) and the coordinator (in the hosting launcher) meet under
 * `ringrun-elastic/<rdzv-id>/`; the workers meet under the generations' keys
 * (rendezvous/generations.ts), in the same store.
 *
 * - `config`: set by the host first: protocol version, rdzv id, the generations' job id, the
 *   ranks per node, MIN and MAX nodes. Every agent checks that its flags agree.
 * - `nodes`: a counter; an agent takes index k = its add minus 1, then sets `node/<k>` (where it
 *   runs, its connection as the server names it).
 * - `beat/<k>`: a counter node k's agent bumps every heartbeat; one that stops moving for the
 *   lease (the I/O timeout) makes node k gone, as does its connection closing.
 * - `admit/<k>`: set by the coordinator when node k may start its workers (at most MAX nodes
 *   run at once; later ones wait for a place).
 * - `gone/<worker>`: the exit code of a worker, set by its agent; `stop/<worker>`: set by the
 *   coordinator for a worker it takes as lost (it did not ask for the next generation in time).
 * - `done/<k>`: node k's workers have finished (one exited 0).
 * - `end`: the job's end, set once by the coordinator: an exit code and the lines every agent
 *   prints (the job failed, or finished while a node waited for a place).
 */

import { TimeoutError } from '../../core/errors.js';
import type { Store } from '../../rendezvous/store.js';

export const kProtocolVersion = 1;

export interface RdzvConfig {
  version: number;
  rdzvId: string;
  /** The generations' job id (rendezvous/generations.ts): fresh for every job at the endpoint. */
  jobId: string;
  nprocPerNode: number;
  minNodes: number;
  maxNodes: number;
}

export interface NodeRecord {
  /** The host name, for reports. */
  host: string;
  /** The address it reaches the endpoint from: the node's name in generations (its workers' host). */
  address: string;
  /** `address:port` of its connection to the store, as the server names it. */
  connection: string;
}

export interface JobEnd {
  code: number;
  lines: string[];
}

export function rdzvKeys(rdzvId: string) {
  const prefix = `ringrun-elastic/${rdzvId}/`;
  return {
    config: `${prefix}config`,
    nodes: `${prefix}nodes`,
    node: (k: number) => `${prefix}node/${k}`,
    beat: (k: number) => `${prefix}beat/${k}`,
    admit: (k: number) => `${prefix}admit/${k}`,
    gone: (worker: string) => `${prefix}gone/${worker}`,
    stop: (worker: string) => `${prefix}stop/${worker}`,
    done: (k: number) => `${prefix}done/${k}`,
    end: `${prefix}end`,
  };
}

export type RdzvKeys = ReturnType<typeof rdzvKeys>;

/** Worker j of node k. */
export function workerId(k: number, j: number): string {
  return `n${k}w${j}`;
}

export function encode(value: unknown): Uint8Array {
  return Buffer.from(JSON.stringify(value));
}

export function decode<T>(bytes: Uint8Array): T {
  return JSON.parse(Buffer.from(bytes).toString('utf8')) as T;
}

/** The value of `key` if it is set now, else undefined. */
export async function peek(store: Store, key: string): Promise<Uint8Array | undefined> {
  try {
    return await store.get(key, 0);
  } catch (error) {
    if (error instanceof TimeoutError) return undefined;
    throw error;
  }
}
