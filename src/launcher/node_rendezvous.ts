/**
 * How the launchers of a per-node job (`ringrun --nnodes N --node-rank i ...`, one per node)
 * meet and stay in step, through a TCP store (rendezvous/) that node 0's launcher hosts at the
 * rendezvous endpoint. The ranks never see this store: rank 0 hosts theirs, at a port node 0
 * chooses (the endpoint's port is taken by this one, which is what broke ringreduce under
 * torchrun, whose agent holds MASTER_PORT the same way).
 *
 * Keys, under `ringrun/`:
 * - `config`: set by node 0 once it listens: the protocol version, N, the ranks per node and the
 *   job id. Every launcher checks that its own flags agree.
 * - `claim/<i>`: a counter each launcher adds 1 to; more than 1 means two launchers claim node
 *   rank i (srun with several tasks per node, or a typo), which fails both.
 * - `node/<i>`: node i's host name, the address it reaches the endpoint from, the endpoint's
 *   address as it sees it, and its connection (so node 0 can tell when that launcher is gone).
 *   Every launcher waits for all N within the start-up timeout, and names the missing ones.
 * - `ranks`: set by node 0 when all have joined: the ranks' store address and, when the
 *   launchers were given no RINGREDUCE_SECRET, the secret node 0 made for the ranks.
 * - `failures` (a counter) and `failure`: the first launcher whose counter is 1 publishes its
 *   report; every launcher watches `failure`, stops its ranks and prints the same report.
 * - `done/<i>` and `left`: a launcher whose ranks all exited 0 says so and waits for the others
 *   (or a failure); node 0 keeps the store up until every launcher has left.
 *
 * Security: the launchers prove knowledge of RINGREDUCE_SECRET when it is set in their
 * environment (the same on every node); without it the endpoint is not authenticated, and
 * node 0 warns.
 */
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import { InvalidArgumentError, TimeoutError } from '../core/errors.js';
import { isLoopback } from '../rendezvous/addresses.js';
import { JobKey } from '../rendezvous/auth.js';
import { TcpStoreClient, TcpStoreServer } from '../rendezvous/tcp_store.js';

const kVersion = 1;
const kPrefix = 'ringrun/';
/** Store gets wait at most this long per request (a Node timer holds at most about 24 days). */
const kWatchChunkMs = 3_600_000;
/** How long a launcher that was not first to fail waits to read the first failure. */
const kFirstFailureWaitMs = 5000;
/** How long node 0 keeps the store up for the other launchers to leave. */
const kLeaveWaitMs = 5000;

export interface Endpoint {
  host: string;
  port: number;
}

export interface NodeInfo {
  node: number;
  host: string;
  /** The local address this node reaches the endpoint from. */
  address: string | undefined;
  /** The endpoint's address as this node reached it. */
  endpointSeenAs: string | undefined;
  /** `address:port` of its store connection, as node 0's server names it. */
  connection: string | undefined;
}

/** What every node's ranks share, set by node 0. */
export interface RanksInfo {
  storeAddr: string;
  jobId: string;
  /** Made by node 0 when the launchers have no RINGREDUCE_SECRET. */
  secret?: string;
}

/** The first failure of the job, as every launcher reports it. */
export interface NodeFailure {
  node: number;
  host: string;
  exitCode: number;
  /** The report, line by line (without "ringrun: "). */
  lines: string[];
}

export interface NodeRendezvousOptions {
  endpoint: Endpoint;
  nnodes: number;
  nodeRank: number;
  nprocPerNode: number;
  /** RINGREDUCE_SECRET of the launchers' environment. */
  secret: string | undefined;
  /** Absolute deadline (performance.now() clock) for reaching the endpoint and every node joining. */
  deadline: number;
  signal: AbortSignal;
  log(message: string): void;
  debug(message: string): void;
}

const key = {
  config: `${kPrefix}config`,
  claim: (node: number) => `${kPrefix}claim/${node}`,
  node: (node: number) => `${kPrefix}node/${node}`,
  ranks: `${kPrefix}ranks`,
  failures: `${kPrefix}failures`,
  failure: `${kPrefix}failure`,
  done: (node: number) => `${kPrefix}done/${node}`,
  left: `${kPrefix}left`,
};

function encode(value: unknown): Uint8Array {
  return Buffer.from(JSON.stringify(value));
}

function decode<T>(bytes: Uint8Array): T {
  return JSON.parse(Buffer.from(bytes).toString('utf8')) as T;
}

export class NodeRendezvous {
  private closing = false;
  /** Node 0: the connections of the other launchers, to tell when one is gone. */
  private readonly connections = new Map<string, number>();
  private readonly doneNodes = new Set<number>();
  /** Node 0: the launchers whose connection has closed (they left, or died). */
  private readonly gone = new Set<number>();
  private onNodeGone: ((node: number) => void) | undefined;

  private constructor(
    private readonly options: NodeRendezvousOptions,
    private readonly client: TcpStoreClient,
    private readonly server: TcpStoreServer | undefined,
  ) {}

  /** Node 0 listens at the endpoint; every node connects to it (retrying until the deadline). */
  static async open(options: NodeRendezvousOptions): Promise<NodeRendezvous> {
    const key = new JobKey(options.secret);
    let server: TcpStoreServer | undefined;
    let rendezvous: NodeRendezvous | undefined;
    if (options.nodeRank === 0) {
      const { host, port } = options.endpoint;
      server = new TcpStoreServer({
        host: isLoopback(host) ? host : '0.0.0.0',
        port,
        key,
        onRefused: (remote, reason) => options.log(`rendezvous endpoint: refused a connection from ${remote}: ${reason}`),
        onProtocolError: (error, remote) =>
          options.log(`rendezvous endpoint: closed a connection from ${remote}: ${error.message}`),
        onDisconnect: (remote) => rendezvous?.disconnected(remote),
      });
      try {
        await server.listen();
      } catch (error) {
        await server.close();
        throw error instanceof InvalidArgumentError
          ? new InvalidArgumentError(
              `--rdzv-endpoint ${host}:${port}: the port is in use on this node (another job, or a launcher's own store); choose another port`,
            )
          : error;
      }
      if (options.secret === undefined) {
        options.log(
          'RINGREDUCE_SECRET is not set: the rendezvous endpoint and the ranks it hands out are not authenticated; set the same RINGREDUCE_SECRET on every node (docs/env.md)',
        );
      }
    }
    try {
      const client = await TcpStoreClient.connect({
        ...options.endpoint,
        connectTimeoutMs: Math.max(1, options.deadline - performance.now()),
        key,
        signal: options.signal,
      });
      rendezvous = new NodeRendezvous(options, client, server);
      return rendezvous;
    } catch (error) {
      await server?.close();
      if (!(error instanceof TimeoutError)) throw error;
      const { host, port } = options.endpoint;
      throw new TimeoutError(
        `could not reach the rendezvous endpoint ${host}:${port} (node 0's ringrun) within the start-up timeout (--start-timeout): ${error.message}`,
      );
    }
  }

  /**
   * Node 0: publishes the job's configuration. Every node: checks it, claims its node rank,
   * says where it is, and waits until every node has. Resolves with the nodes, in node order,
   * and the job id (node 0's `jobId`).
   */
  async join(jobId: string): Promise<{ nodes: NodeInfo[]; jobId: string }> {
    const { nnodes, nodeRank, nprocPerNode } = this.options;
    if (nodeRank === 0) await this.client.set(key.config, encode({ version: kVersion, nnodes, nprocPerNode, jobId }));
    const config = decode<{ version: number; nnodes: number; nprocPerNode: number; jobId: string }>(
      await this.client.get(key.config, this.remaining()),
    );
    if (config.version !== kVersion) {
      throw new InvalidArgumentError(
        `node 0's ringrun speaks rendezvous version ${config.version}, this one ${kVersion}: run the same ringreduce on every node`,
      );
    }
    if (config.nnodes !== nnodes || config.nprocPerNode !== nprocPerNode) {
      throw new InvalidArgumentError(
        `node 0 runs --nnodes ${config.nnodes} --nproc-per-node ${config.nprocPerNode}, this node --nnodes ${nnodes} --nproc-per-node ${nprocPerNode}: give every node the same`,
      );
    }
    if ((await this.client.add(key.claim(nodeRank), 1)) !== 1) {
      throw new InvalidArgumentError(
        `node rank ${nodeRank} is claimed by two launchers: start one ringrun per node (under Slurm: srun --ntasks-per-node=1), each with its own --node-rank`,
      );
    }
    const self: NodeInfo = {
      node: nodeRank,
      host: hostname(),
      address: this.client.localAddress,
      endpointSeenAs: this.client.remoteAddress,
      connection:
        this.client.localAddress === undefined ? undefined : `${this.client.localAddress}:${this.client.localPort ?? ''}`,
    };
    await this.client.set(key.node(nodeRank), encode(self));
    const nodes: (NodeInfo | undefined)[] = new Array(nnodes).fill(undefined);
    await Promise.all(
      Array.from({ length: nnodes }, async (_, node) => {
        try {
          nodes[node] = decode<NodeInfo>(await this.client.get(key.node(node), this.remaining()));
        } catch (error) {
          if (!(error instanceof TimeoutError)) throw error;
        }
      }),
    );
    const missing = nodes.flatMap((info, node) => (info === undefined ? [node] : []));
    if (missing.length > 0) {
      throw new TimeoutError(
        `${missing.length === 1 ? 'node' : 'nodes'} ${missing.join(', ')} of ${nnodes} did not join at the rendezvous endpoint ${this.where()} within the start-up timeout (--start-timeout): is ringrun started on every node, with --nnodes ${nnodes} and its own --node-rank?`,
      );
    }
    const joined = nodes as NodeInfo[];
    for (const info of joined) if (info.connection !== undefined) this.connections.set(info.connection, info.node);
    return { nodes: joined, jobId: config.jobId };
  }

  /** Node 0: hands the ranks' store address (and secret) to every node. */
  async publishRanks(info: RanksInfo): Promise<void> {
    await this.client.set(key.ranks, encode(info));
  }

  /** Every node: what node 0 published (at once, since every node has joined). */
  async ranks(): Promise<RanksInfo> {
    const left = Math.ceil(this.options.deadline - performance.now());
    return decode<RanksInfo>(await this.client.get(key.ranks, Math.max(left, 5000)));
  }

  /**
   * Calls `onFailure` once, with the first failure of the job (another node's, or this one's
   * as published), or with a failure naming the endpoint when the connection to it is lost.
   */
  watchFailures(onFailure: (failure: NodeFailure) => void, onNodeGone: (node: number) => void): void {
    this.onNodeGone = onNodeGone;
    void (async () => {
      for (;;) {
        try {
          onFailure(decode<NodeFailure>(await this.client.get(key.failure, kWatchChunkMs)));
          return;
        } catch (error) {
          if (error instanceof TimeoutError) continue;
          if (this.closing) return;
          onFailure({
            node: 0,
            host: this.options.endpoint.host,
            exitCode: 1,
            lines: [
              `job failed: lost the rendezvous endpoint ${this.where()} (node 0's ringrun exited, or its host is unreachable): ${(error as Error).message}`,
            ],
          });
          return;
        }
      }
    })();
  }

  /** Publishes `failure` unless another was first; resolves with the first one. */
  async reportFailure(failure: NodeFailure): Promise<NodeFailure> {
    try {
      if ((await this.client.add(key.failures, 1)) === 1) {
        await this.client.set(key.failure, encode(failure));
        return failure;
      }
      return decode<NodeFailure>(await this.client.get(key.failure, kFirstFailureWaitMs));
    } catch (error) {
      this.options.debug(`could not publish the failure at the rendezvous endpoint: ${(error as Error).message}`);
      return failure;
    }
  }

  /** This node's ranks all exited 0: says so, then resolves once every node has (true) or a failure came (false). */
  async finish(failed: Promise<unknown>): Promise<boolean> {
    const { nnodes, nodeRank } = this.options;
    await this.client.set(key.done(nodeRank), encode({ node: nodeRank }));
    const allDone = Promise.all(
      Array.from({ length: nnodes }, async (_, node) => {
        for (;;) {
          try {
            await this.client.get(key.done(node), kWatchChunkMs);
            this.doneNodes.add(node);
            return;
          } catch (error) {
            if (!(error instanceof TimeoutError)) throw error;
          }
        }
      }),
    ).then(() => true);
    return Promise.race([allDone, failed.then(() => false)]).catch(() => false);
  }

  /**
   * Leaves. Once the job ran (`ran`), node 0 keeps the store up until the others have left or
   * are gone (bounded): they may still read the job's outcome from it.
   */
  async close(ran: boolean): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    try {
      const left = await this.client.add(key.left, 1);
      if (ran && this.server !== undefined && left < this.options.nnodes) {
        const until = performance.now() + kLeaveWaitMs;
        const others = this.options.nnodes - 1;
        while (
          performance.now() < until &&
          this.gone.size < others &&
          (await this.client.add(key.left, 0)) < this.options.nnodes
        ) {
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }
    } catch {
      // The store is gone already: nothing to wait for.
    }
    await this.client.close();
    await this.server?.close();
  }

  /** The endpoint, as given. */
  where(): string {
    const { host, port } = this.options.endpoint;
    return `${host.includes(':') ? `[${host}]` : host}:${port}`;
  }

  private remaining(): number {
    const left = this.options.deadline - performance.now();
    if (left <= 0) throw new TimeoutError(`the start-up timeout passed at the rendezvous endpoint ${this.where()}`);
    return Math.ceil(left);
  }

  /** Node 0's server saw a launcher's connection close. */
  private disconnected(remote: string): void {
    const node = this.connections.get(remote);
    if (node === undefined) return;
    this.gone.add(node);
    if (this.closing || this.doneNodes.has(node)) return;
    this.onNodeGone?.(node);
  }
}
