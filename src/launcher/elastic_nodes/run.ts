/**
 * `ringrun --elastic --nnodes MIN:MAX --nproc-per-node P --rdzv-endpoint host:port`, run on
 * every node as torchrun is. The launcher that can bind the endpoint (its host is this node's
 * address, and the port is free) hosts the rendezvous store there and runs the coordinator
 * (coordinator.ts); every launcher, that one included, connects to it and runs an agent
 * (agent.ts) that owns its node's workers. The workers use the same store for their generations
 * and their meshes. The job survives the loss of any node but the hosting one; when that one
 * goes, every other agent loses the store and stops its workers (agent.ts).
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { InvalidArgumentError, TimeoutError } from '../../core/errors.js';
import { JobKey } from '../../rendezvous/auth.js';
import { TcpStoreClient, TcpStoreServer } from '../../rendezvous/tcp_store.js';
import { formatHostPort, kEnv, newJobId } from '../env_contract.js';
import { signalExitCode } from '../failure_report.js';
import type { ElasticNodesConfig, LaunchConfig, RunIo } from '../launch_config.js';
import { envMs, forwardedEnv, kDefaultStartTimeoutMs } from '../run_job.js';
import { NodeAgent } from './agent.js';
import { Coordinator } from './coordinator.js';
import { decode, encode, kProtocolVersion, type RdzvConfig, rdzvKeys } from './keys.js';

const kDefaultIoTimeoutMs = 30_000;
const kDefaultHeartbeatMs = 2000;
/** After the job, how long the host keeps the store up for the nodes still connected to read its end. */
const kLeaveWaitMs = 1000;

export async function runElasticNodes(config: LaunchConfig, nodes: ElasticNodesConfig, io: RunIo): Promise<number> {
  let forwarded: Record<string, string>;
  try {
    forwarded = forwardedEnv(config, io.env);
  } catch (error) {
    if (!(error instanceof InvalidArgumentError)) throw error;
    io.log(error.message);
    return 2;
  }
  const secret = io.env[kEnv.secret] || undefined;
  const key = new JobKey(secret);
  const startTimeoutMs = config.settings.startTimeoutMs ?? envMs(io.env[kEnv.startTimeoutMs]) ?? kDefaultStartTimeoutMs;
  const leaseMs = config.settings.ioTimeoutMs ?? envMs(io.env[kEnv.ioTimeoutMs]) ?? kDefaultIoTimeoutMs;
  // The launchers beat even when the ranks' pings are off (--heartbeat 0), a few times per lease.
  const ranksBeat = config.settings.heartbeatMs ?? envMs(io.env[kEnv.heartbeatMs]) ?? kDefaultHeartbeatMs;
  const heartbeatMs = Math.max(10, Math.min(ranksBeat || leaseMs, leaseMs / 3));
  const { endpoint } = nodes;
  const where = formatHostPort(endpoint.host, endpoint.port);
  const keys = rdzvKeys(nodes.rdzvId);

  let coordinator: Coordinator | undefined;
  const server = await hostEndpoint(nodes, key, io, (remote) => coordinator?.disconnected(remote));
  const starting = new AbortController();
  let early: NodeJS.Signals | undefined;
  let agent: NodeAgent | undefined;
  const unsubscribe = io.onInterrupt((signal) => {
    early ??= signal;
    starting.abort();
    const lines = [`job failed: the ringrun of node ${agent?.node ?? '?'} received ${signal}`];
    coordinator?.end(signalExitCode(signal), lines);
    agent?.stop({ code: signalExitCode(signal), lines: server === undefined ? [`interrupted by ${signal}`] : lines });
  });
  let client: TcpStoreClient | undefined;
  try {
    try {
      client = await TcpStoreClient.connect({ ...endpoint, connectTimeoutMs: startTimeoutMs, key, signal: starting.signal });
    } catch (error) {
      if (early !== undefined) return signalExitCode(early);
      io.log(
        `could not reach the rendezvous at ${where} within the start-up timeout (--start-timeout): ${(error as Error).message}`,
      );
      return error instanceof TimeoutError ? 124 : 1;
    }
    if (server !== undefined) {
      io.debug(`elastic: hosting the rendezvous at ${where}`);
      const own: RdzvConfig = {
        version: kProtocolVersion,
        rdzvId: nodes.rdzvId,
        jobId: newJobId(),
        nprocPerNode: nodes.nprocPerNode,
        minNodes: nodes.minNodes,
        maxNodes: nodes.maxNodes,
      };
      await client.set(keys.config, encode(own));
      if (secret === undefined) {
        io.log(
          'RINGREDUCE_SECRET is not set: the rendezvous and the workers are not authenticated; set the same RINGREDUCE_SECRET on every node (docs/env.md)',
        );
      }
      coordinator = new Coordinator({
        store: client,
        keys,
        rdzv: own,
        leaseMs,
        lastCallMs: nodes.lastCallMs,
        startTimeoutMs,
        timeoutMs: nodes.timeoutMs,
        log: io.log,
        debug: io.debug,
      });
      coordinator.start();
    }
    let rdzv: RdzvConfig;
    try {
      rdzv = decode<RdzvConfig>(await client.get(keys.config, startTimeoutMs));
      checkAgrees(rdzv, nodes);
    } catch (error) {
      if (error instanceof TimeoutError) {
        io.log(
          `no job --rdzv-id ${nodes.rdzvId} at the rendezvous ${where} within the start-up timeout: give every node the same --rdzv-id`,
        );
        return 124;
      }
      io.log((error as Error).message);
      return error instanceof InvalidArgumentError ? 2 : 1;
    }
    agent = new NodeAgent({
      client,
      keys,
      rdzv,
      where,
      launch: {
        config,
        io,
        secret: secret ?? '',
        marker: '',
        storeAddr: where,
        reachable: true,
        browserNodeAddress: undefined,
        forwarded,
        startTimeoutMs,
        // A worker waits for a generation that lists it at least as long as the job may stay below MIN.
        workerStartTimeoutMs: Math.max(startTimeoutMs, nodes.timeoutMs + 5000) + nodes.lastCallMs,
      },
      heartbeatMs,
      leaseMs,
      log: io.log,
      debug: io.debug,
    });
    if (early !== undefined) return signalExitCode(early);
    const end = await agent.run();
    if (coordinator !== undefined) {
      // The store must outlive every node still running workers.
      await coordinator.othersFinished(agent.node);
      coordinator.end(0, ['the job finished before this node joined it']);
      await Promise.race([coordinator.othersGone(agent.node), sleep(kLeaveWaitMs)]);
    }
    for (const line of end.lines) io.log(line);
    return end.code;
  } finally {
    unsubscribe();
    await client?.close();
    await server?.close();
  }
}

/** The store at the endpoint, when this launcher can bind it; else undefined (another node hosts it). */
async function hostEndpoint(
  nodes: ElasticNodesConfig,
  key: JobKey,
  io: RunIo,
  onDisconnect: (remote: string) => void,
): Promise<TcpStoreServer | undefined> {
  const { host, port } = nodes.endpoint;
  let address: string;
  try {
    address = isIP(host) !== 0 ? host : (await lookup(host)).address;
  } catch {
    return undefined; // a name that does not resolve here yet: the dial retries it
  }
  const server = new TcpStoreServer({
    host: address,
    port,
    key,
    onDisconnect,
    onRefused: (remote, reason) => io.log(`rendezvous: refused a connection from ${remote}: ${reason}`),
    onProtocolError: (error, remote) => io.log(`rendezvous: closed a connection from ${remote}: ${error.message}`),
  });
  try {
    await server.listen();
    return server;
  } catch (error) {
    await server.close();
    // Not this node's address, or another launcher on this machine hosts it already.
    if (error instanceof InvalidArgumentError || (error as NodeJS.ErrnoException).code === 'EADDRNOTAVAIL') return undefined;
    throw error;
  }
}

/** Every launcher of one job must run the same protocol, ranks per node and node range. */
function checkAgrees(rdzv: RdzvConfig, nodes: ElasticNodesConfig): void {
  if (rdzv.version !== kProtocolVersion) {
    throw new InvalidArgumentError(
      `the hosting ringrun speaks rendezvous version ${rdzv.version}, this one ${kProtocolVersion}: run the same ringreduce on every node`,
    );
  }
  const theirs = `--nnodes ${rdzv.minNodes}:${rdzv.maxNodes} --nproc-per-node ${rdzv.nprocPerNode}`;
  const ours = `--nnodes ${nodes.minNodes}:${nodes.maxNodes} --nproc-per-node ${nodes.nprocPerNode}`;
  if (theirs !== ours) {
    throw new InvalidArgumentError(`the hosting ringrun runs ${theirs}, this one ${ours}: give every node the same`);
  }
}
