/**
 * The per-node mode: `ringrun --nnodes N --node-rank i --nproc-per-node P --rdzv-endpoint
 * host:port <command>`, started once on every node (by Slurm, Kubernetes or by hand), as
 * torchrun is. This launcher starts the P ranks of node i, ranks i·P … i·P+P-1, with the whole
 * environment contract (local rank and size within the node, cross rank and size = node index
 * and count).
 *
 * The launchers meet at the endpoint, which node 0's hosts (node_rendezvous.ts): every node
 * must join within --start-timeout, or each launcher names the missing nodes and exits 124.
 * Node 0 then chooses the ranks' store: rank 0 hosts it on node 0, at the address the other
 * nodes reach node 0 by and a free port (the endpoint's port is the launchers'). Fail fast
 * across nodes: the first failure on any node (a rank that fails, a launcher interrupted or
 * gone) is published; every launcher stops its ranks, prints that same report and exits with
 * its code. A node whose ranks all exit 0 waits for the others, so that every launcher exits
 * with the job's status. One node (--nnodes 1) is a plain local job.
 */
import { isIP } from 'node:net';
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import { InvalidArgumentError, TimeoutError } from '../core/errors.js';
import { interfaceAddress, isLoopback } from '../rendezvous/addresses.js';
import { allocatorEnv, contractEnv, formatHostPort, type JobContract, kEnv, newJobId, newSecret } from './env_contract.js';
import { failureExitCode, failureReport, notStartedReport, signalExitCode } from './failure_report.js';
import { findFreePort } from './free_port.js';
import { Job, kStartTimeoutExitCode } from './job.js';
import type { LaunchConfig, PerNodeConfig, RunIo } from './launch_config.js';
import { type NodeFailure, type NodeInfo, NodeRendezvous, type RanksInfo } from './node_rendezvous.js';
import { RankLogFiles } from './rank_log_files.js';
import type { RankSpec } from './rank_process.js';
import { buildSpecs, envMs, forwardedEnv, kDefaultStartTimeoutMs, runJob } from './run_job.js';
import { TimelineFiles } from './timeline_files.js';

export async function runNode(config: LaunchConfig, io: RunIo): Promise<number> {
  const perNode = config.perNode as PerNodeConfig;
  for (const line of perNode.fromSlurm) io.debug(line);
  if (perNode.nnodes === 1 || perNode.endpoint === undefined) {
    return runJob({ ...config, np: perNode.nprocPerNode, perNode: undefined }, io);
  }
  return new NodeRun(config, perNode, perNode.endpoint, io).run();
}

class NodeRun {
  private readonly host = hostname();
  private readonly localRanks: number[];
  private readonly size: number;
  private readonly startTimeoutMs: number;
  private rendezvous: NodeRendezvous | undefined;
  private job: Job | undefined;
  /** The job's first failure as published (this node's or another's), once this node knows it. */
  private first: Promise<NodeFailure> | undefined;
  /** Another node's failure, as the watch delivered it. */
  private remote: NodeFailure | undefined;
  private onRemote: () => void = () => {};
  private readonly remoteFailed = new Promise<void>((resolve) => {
    this.onRemote = resolve;
  });

  constructor(
    private readonly config: LaunchConfig,
    private readonly perNode: PerNodeConfig,
    private readonly endpoint: { host: string; port: number },
    private readonly io: RunIo,
  ) {
    const { nodeRank, nprocPerNode, nnodes } = perNode;
    this.localRanks = Array.from({ length: nprocPerNode }, (_, j) => nodeRank * nprocPerNode + j);
    this.size = nnodes * nprocPerNode;
    this.startTimeoutMs = config.settings.startTimeoutMs ?? envMs(io.env[kEnv.startTimeoutMs]) ?? kDefaultStartTimeoutMs;
  }

  async run(): Promise<number> {
    const { io, config } = this;
    let extraEnv: Record<string, string>;
    try {
      extraEnv = { ...allocatorEnv(io.env), ...forwardedEnv(config, io.env) };
    } catch (error) {
      if (!(error instanceof InvalidArgumentError)) throw error;
      io.log(error.message);
      return 2;
    }
    let logs: RankLogFiles | undefined;
    let timeline: TimelineFiles | undefined;
    try {
      if (config.outputDir !== undefined) logs = new RankLogFiles(config.outputDir, this.localRanks, io.log);
      if (config.timeline !== undefined) timeline = new TimelineFiles(config.timeline, io.cwd, this.perNode.nodeRank);
    } catch (error) {
      io.log(
        `${config.outputDir !== undefined && logs === undefined ? `--output-dir ${config.outputDir}` : `--timeline ${config.timeline}`}: ${(error as Error).message}`,
      );
      await logs?.close();
      return 1;
    }
    const starting = new AbortController();
    let early: NodeJS.Signals | undefined;
    const unsubscribe = io.onInterrupt((signal) =>
      this.interrupted(signal, () => {
        early ??= signal;
        starting.abort(new Error(`interrupted by ${signal}`));
      }),
    );
    let merged = false;
    try {
      let ranks: RanksInfo;
      try {
        ranks = await untilAborted(this.meet(starting.signal), starting.signal);
      } catch (error) {
        if (early !== undefined) return signalExitCode(early);
        io.log((error as Error).message);
        return error instanceof TimeoutError ? kStartTimeoutExitCode : 1;
      }
      const specs = buildSpecs(() => this.specs(ranks, extraEnv, logs, timeline), io);
      if (specs === undefined) return 2;
      const job = new Job({
        ranks: specs,
        startTimeoutMs: this.startTimeoutMs,
        log: io.log,
        debug: io.debug,
        onFailure: (failure) => {
          const { exit } = failure;
          const lines = failureReport(failure);
          lines[0] = (lines[0] ?? '').replace(
            /^(job failed: rank \d+(?: \(pid \d+\))?)/,
            `$1 on node ${this.perNode.nodeRank} (${this.host})`,
          );
          this.publish({ node: this.perNode.nodeRank, host: this.host, exitCode: failureExitCode(exit), lines });
        },
      });
      this.job = job;
      if (early !== undefined) job.interrupt(early);
      const outcome = await job.finished;
      merged = true;
      timeline?.finish(this.localRanks, this.size, [], io.log);
      if (outcome.interruptedBy !== undefined) return outcome.exitCode;
      if (this.first === undefined && outcome.notStarted !== undefined) {
        const lines = notStartedReport(outcome.notStarted, this.startTimeoutMs);
        this.publish({ node: this.perNode.nodeRank, host: this.host, exitCode: kStartTimeoutExitCode, lines });
      }
      if (this.first === undefined && this.remote === undefined && outcome.exitCode === 0) {
        io.debug(
          `the ${this.localRanks.length} ranks of node ${this.perNode.nodeRank} exited with code 0; waiting for the other nodes`,
        );
        if (await (this.rendezvous as NodeRendezvous).finish(this.remoteFailed)) {
          io.debug(`all ${this.perNode.nnodes} nodes finished`);
          return 0;
        }
      }
      const report = this.first !== undefined ? await this.first : this.remote;
      if (report === undefined) return outcome.exitCode;
      for (const line of report.lines) io.log(line);
      return report.exitCode;
    } finally {
      unsubscribe();
      if (!merged) timeline?.discard();
      await this.rendezvous?.close(this.job !== undefined);
      await logs?.close();
    }
  }

  /** Joins the other launchers; node 0 also chooses and publishes the ranks' store. */
  private async meet(signal: AbortSignal): Promise<RanksInfo> {
    const { io, config, perNode } = this;
    const { nnodes, nodeRank } = perNode;
    const where = formatHostPort(this.endpoint.host, this.endpoint.port);
    io.debug(`node ${nodeRank} of ${nnodes} (${this.host}): rendezvous at ${where}${nodeRank === 0 ? ', hosted here' : ''}`);
    const rendezvous = await NodeRendezvous.open({
      endpoint: this.endpoint,
      nnodes,
      nodeRank,
      nprocPerNode: perNode.nprocPerNode,
      secret: io.env[kEnv.secret] || undefined,
      deadline: performance.now() + this.startTimeoutMs,
      signal,
      log: io.log,
      debug: io.debug,
    });
    this.rendezvous = rendezvous;
    const { nodes, jobId } = await rendezvous.join(newJobId());
    io.debug(`all ${nnodes} nodes joined: ${nodes.map((n) => `${n.node}=${n.host}`).join(', ')}`);
    if (nodeRank === 0) {
      const host = this.ranksStoreHost(nodes);
      const port = config.storePort ?? (await freePortOn(host));
      const info: RanksInfo = { storeAddr: formatHostPort(host, port), jobId };
      if (!io.env[kEnv.secret]) info.secret = newSecret();
      await rendezvous.publishRanks(info);
    }
    const ranks = await rendezvous.ranks();
    io.debug(
      `job ${ranks.jobId}: ${this.size} ranks, ranks ${this.localRanks.join(', ')} here, their store at ${ranks.storeAddr}`,
    );
    rendezvous.watchFailures(
      (failure) => this.onFailurePublished(failure),
      (node) => this.onNodeGone(node, nodes),
    );
    return ranks;
  }

  /**
   * Where rank 0 hosts the ranks' store: node 0's address as the other nodes reach it (the
   * interface's with --network-interface; else the address node 0 reaches the endpoint from,
   * unless that is loopback, as when its host name maps to 127.0.1.1: then node 1's view).
   */
  private ranksStoreHost(nodes: readonly NodeInfo[]): string {
    if (this.config.networkInterface !== undefined) return interfaceAddress(this.config.networkInterface);
    const own = nodes[0]?.address;
    if (own !== undefined && !isLoopback(own) && isIP(own) !== 0) return own;
    return nodes[1]?.endpointSeenAs ?? this.endpoint.host;
  }

  private specs(
    ranks: RanksInfo,
    extraEnv: Record<string, string>,
    logs: RankLogFiles | undefined,
    timeline: TimelineFiles | undefined,
  ): RankSpec[] {
    const { io, config, perNode } = this;
    const contract: JobContract = {
      size: this.size,
      storeAddr: ranks.storeAddr,
      jobId: ranks.jobId,
      secret: io.env[kEnv.secret] || ranks.secret || newSecret(),
      ...(config.networkInterface !== undefined && { networkInterface: config.networkInterface }),
      settings: config.settings,
    };
    return this.localRanks.map((rank, localRank) => {
      const env: NodeJS.ProcessEnv = {
        ...io.env,
        ...extraEnv,
        ...contractEnv(contract, {
          rank,
          localRank,
          localSize: perNode.nprocPerNode,
          crossRank: perNode.nodeRank,
          crossSize: perNode.nnodes,
        }),
      };
      if (timeline !== undefined) env[kEnv.timeline] = timeline.rankPath;
      return {
        rank,
        command: config.command,
        args: config.args,
        env,
        tailLines: 10,
        sinks: { stdout: io.stdout, stderr: io.stderr, line: logs?.lineSink(rank) },
        guard: io.guard,
      };
    });
  }

  /** Publishes this node's failure, unless the job's first failure is already known. */
  private publish(failure: NodeFailure): void {
    if (this.first !== undefined || this.remote !== undefined) return;
    this.first = (this.rendezvous as NodeRendezvous).reportFailure(failure);
  }

  /** The watch delivered the job's first failure: another node's (ours we know already). */
  private onFailurePublished(failure: NodeFailure): void {
    if (failure.node === this.perNode.nodeRank && this.first !== undefined) return;
    this.remote ??= failure;
    this.onRemote();
    // The report's first line names the node: "rank 3 (pid 12) on node 1 (b) exited with code 3".
    const what = (failure.lines[0] ?? '').replace(/^job failed: /, '');
    this.job?.abort(`the job failed on another node: ${what}`, failure.exitCode);
  }

  /** Node 0: a launcher's connection closed before it finished: its node is gone. */
  private onNodeGone(node: number, nodes: readonly NodeInfo[]): void {
    if (this.first !== undefined || this.remote !== undefined) return;
    const host = nodes[node]?.host ?? '?';
    const lines = [
      `job failed: the ringrun of node ${node} (${host}) is gone: it was killed, its host went down, or its connection to the rendezvous endpoint broke`,
    ];
    this.publish({ node, host, exitCode: 1, lines });
    this.job?.abort(`the ringrun of node ${node} (${host}) is gone`, 1);
  }

  /** A signal to this launcher: stops its ranks and, once it has joined, every node's. */
  private interrupted(signal: NodeJS.Signals, beforeJob: () => void): void {
    if (this.job === undefined) {
      beforeJob();
      return;
    }
    this.job.interrupt(signal);
    if (this.rendezvous === undefined) return;
    const lines = [`job failed: the ringrun of node ${this.perNode.nodeRank} (${this.host}) received ${signal}`];
    this.publish({ node: this.perNode.nodeRank, host: this.host, exitCode: signalExitCode(signal), lines });
  }
}

/** `promise`, or a rejection as soon as `signal` aborts. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** A free port on `host` (this node's address), or on every interface when that cannot be bound. */
async function freePortOn(host: string): Promise<number> {
  try {
    return await findFreePort(isIP(host) !== 0 ? host : '0.0.0.0');
  } catch {
    return findFreePort('0.0.0.0');
  }
}
