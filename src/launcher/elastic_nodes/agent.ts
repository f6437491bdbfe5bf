/**
 * A node's agent in the elastic per-node mode (torchrun's elastic agent): every launcher runs
 * one, the hosting launcher's included. It takes a node index at the rendezvous, beats its
 * heartbeat, waits for a place in the job (`admit/<k>`), then starts its P workers (elastic
 * workers, as the one-launcher mode starts them: elastic_workers.ts) and reports each one's end.
 * The coordinator decides the generations; the workers read them from the store themselves.
 *
 * It ends when its workers have all ended (exit 0 if one finished), when the coordinator ends
 * the job (`end`), when it is interrupted, or when it loses the rendezvous: a heartbeat not
 * answered within the lease (the I/O timeout), or the connection closing. Each time it stops
 * its workers first.
 */
import { hostname } from 'node:os';
import { TimeoutError } from '../../core/errors.js';
import type { TcpStoreClient } from '../../rendezvous/tcp_store.js';
import { kThisHost } from '../elastic_hosts.js';
import { spawnWorker, stopWorkers, type WorkerLaunch } from '../elastic_workers.js';
import { describeExit } from '../failure_report.js';
import type { RankExit, RankRunner } from '../rank_runner.js';
import { decode, encode, type JobEnd, type NodeRecord, peek, type RdzvConfig, type RdzvKeys, workerId } from './keys.js';

/** A get waits at most this long per request, asked again while the agent runs. */
const kWatchMs = 3_600_000;

export interface AgentOptions {
  client: TcpStoreClient;
  keys: RdzvKeys;
  rdzv: RdzvConfig;
  /** The endpoint as given, for messages. */
  where: string;
  /** What every worker shares but its id (the store address, secret, settings). */
  launch: Omit<WorkerLaunch, 'jobId'>;
  heartbeatMs: number;
  leaseMs: number;
  log(message: string): void;
  debug(message: string): void;
}

/** How the agent ended: its exit code and the lines it prints. */
export interface AgentEnd {
  code: number;
  lines: string[];
}

interface Worker {
  id: string;
  process: RankRunner;
  exit?: RankExit;
}

export class NodeAgent {
  private k = -1;
  private readonly workers: Worker[] = [];
  private outcome: ((end: AgentEnd) => void) | undefined;
  private readonly ended = new Promise<AgentEnd>((resolve) => {
    this.outcome = resolve;
  });
  private over = false;
  private beating: NodeJS.Timeout | undefined;

  constructor(private readonly options: AgentOptions) {}

  /** This node's index at the rendezvous (-1 before it registered). */
  get node(): number {
    return this.k;
  }

  /** Registers, runs this node's workers and resolves with how the agent ended. */
  async run(): Promise<AgentEnd> {
    const { client, keys } = this.options;
    this.k = (await client.add(keys.nodes, 1)) - 1;
    const record: NodeRecord = {
      host: hostname(),
      address: client.localAddress ?? '?',
      connection: `${client.localAddress}:${client.localPort}`,
    };
    await client.set(keys.node(this.k), encode(record));
    this.options.log(`elastic: this is node ${this.k} (${record.address}) at the rendezvous ${this.options.where}`);
    this.beating = setInterval(() => void this.beat(), this.options.heartbeatMs);
    void this.beat();
    void this.watchEnd();
    void this.start();
    try {
      return await this.ended;
    } finally {
      clearInterval(this.beating);
      await this.stopWorkers();
    }
  }

  /** Stops the workers and ends the agent (an interrupt). */
  stop(end: AgentEnd): void {
    this.finish(end);
  }

  private finish(end: AgentEnd): void {
    if (this.over) return;
    this.over = true;
    for (const worker of this.running()) worker.process.stop('SIGTERM');
    this.outcome?.(end);
  }

  /** Bumps the heartbeat (within the lease, or the rendezvous is lost) and stops workers the coordinator gave up on. */
  private async beat(): Promise<void> {
    const { client, keys, leaseMs } = this.options;
    try {
      await withinMs(client.add(keys.beat(this.k), 1), leaseMs, `no heartbeat answered within ${leaseMs} ms (--io-timeout)`);
      for (const worker of this.running()) {
        if ((await peek(client, keys.stop(worker.id))) === undefined) continue;
        this.options.log(`elastic: stopping worker ${worker.id}: the job went on without it`);
        worker.process.stop('SIGTERM');
      }
    } catch (error) {
      this.lost(error as Error);
    }
  }

  private async watchEnd(): Promise<void> {
    const { client, keys } = this.options;
    for (;;) {
      try {
        this.finish(decode<JobEnd>(await client.get(keys.end, kWatchMs)));
        return;
      } catch (error) {
        if (error instanceof TimeoutError) continue;
        this.lost(error as Error);
        return;
      }
    }
  }

  private lost(error: Error): void {
    if (this.over) return;
    this.finish({
      code: 1,
      lines: [
        `job failed: lost the rendezvous at ${this.options.where} (the ringrun hosting it exited, or its node is unreachable): ${error.message}; stopping the workers of node ${this.k}`,
      ],
    });
  }

  /** Waits for a place in the job, then starts the workers. */
  private async start(): Promise<void> {
    const { client, keys, rdzv } = this.options;
    for (;;) {
      try {
        await client.get(keys.admit(this.k), kWatchMs);
        break;
      } catch (error) {
        if (error instanceof TimeoutError && !this.over) continue;
        return; // watchEnd or the heartbeat report a lost store
      }
    }
    if (this.over) return;
    const first = this.k * rdzv.nprocPerNode;
    for (let j = 0; j < rdzv.nprocPerNode; j++) {
      const id = workerId(this.k, j);
      const process = spawnWorker({ ...this.options.launch, jobId: rdzv.jobId }, first + j, id, kThisHost);
      const worker: Worker = { id, process };
      this.workers.push(worker);
      void process.exited.then((exit) => this.onExit(worker, exit));
    }
    this.options.debug(`elastic: node ${this.k} started workers ${this.workers.map((w) => w.id).join(', ')}`);
  }

  private onExit(worker: Worker, exit: RankExit): void {
    worker.exit = exit;
    if (this.over) return;
    const { client, keys } = this.options;
    const code = exit.code ?? 128;
    if (code !== 0) this.options.log(`elastic: worker ${worker.id} ${describeExit(exit)}`);
    client.set(keys.gone(worker.id), encode(code)).catch(() => {});
    if (this.running().length > 0) return;
    if (this.workers.some((w) => w.exit?.code === 0)) {
      client
        .set(keys.done(this.k), encode(1))
        .catch(() => {})
        .finally(() => this.finish({ code: 0, lines: [] }));
      return;
    }
    this.finish({
      code: 1,
      lines: [
        `job failed on node ${this.k}: every worker ended without finishing: ${this.workers.map((w) => `${w.id} ${describeExit(w.exit as RankExit)}`).join('; ')}`,
      ],
    });
  }

  private running(): Worker[] {
    return this.workers.filter((w) => w.exit === undefined);
  }

  /** SIGTERM, then SIGKILL after a grace period (elastic_workers.ts). */
  private stopWorkers(): Promise<void> {
    return stopWorkers(this.running().map((worker) => worker.process));
  }
}

/** `promise`, or a TimeoutError after `ms`. */
function withinMs<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(what)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}
