/**
 * The coordinator of an elastic per-node job, run by the launcher that hosts the rendezvous
 * store (keys.ts has the keys). It is the only writer of the generations
 * (rendezvous/generations.ts) and decides them node by node, as the one-launcher driver
 * (elastic_driver.ts) does worker by worker:
 *
 * - Nodes register at the store; at most MAX run at once (`admit/<k>`), later ones wait for a
 *   place. A node is ready once each of its workers has reached the store.
 * - The first round: once MIN nodes are ready, it waits up to the last call for more (not at all
 *   with MAX), then publishes their workers, node by node in the order they registered.
 * - A node leaves when its launcher's connection closes or its heartbeat lapses (the lease: the
 *   I/O timeout). Its workers' peers then fail and ask for the next generation; the workers that
 *   ask within the I/O timeout of the first go on (a worker of a node that left, or one that
 *   exited, is not waited for). Below MIN nodes the survivors wait, and the job fails after the
 *   elastic timeout.
 * - A node that becomes ready later is appended in a new generation, which the running workers
 *   let in at their next commit. Once a worker has finished (exit 0), no node joins.
 *
 * It polls the store (every kTickMs, over loopback): the state it reads is small and the
 * decisions are then taken in one place, in order.
 */
import { performance } from 'node:perf_hooks';
import { brokenKey, leftKey, type Member, publishGeneration, readyKey } from '../../rendezvous/generations.js';
import type { Store } from '../../rendezvous/store.js';
import { decode, encode, type JobEnd, type NodeRecord, peek, type RdzvConfig, type RdzvKeys, workerId } from './keys.js';

const kTickMs = 100;

export interface CoordinatorOptions {
  store: Store;
  keys: RdzvKeys;
  rdzv: RdzvConfig;
  /** A node not heard from this long is gone; also how long survivors have to ask for the next generation. */
  leaseMs: number;
  lastCallMs: number;
  startTimeoutMs: number;
  /** How long the job may stay below MIN nodes. */
  timeoutMs: number;
  log(message: string): void;
  debug(message: string): void;
}

interface NodeState {
  k: number;
  record: NodeRecord;
  beats: number;
  heardAt: number;
  admitted: boolean;
  waitingSaid: boolean;
  /** Every worker reached the store (or ended). */
  ready: boolean;
  /** Its workers have been put in a generation (or the pending one). */
  joined: boolean;
  done: boolean;
  /** Why it left, once it has. */
  gone?: string;
  workers: string[];
  readyWorkers: Set<string>;
  exits: Map<string, number>;
  /** Workers taken as lost (asked to stop). */
  lost: Set<string>;
}

export class Coordinator {
  private readonly nodes: NodeState[] = [];
  /** Connections closed before their node was read. */
  private readonly closed = new Set<string>();
  private generation = 0;
  private members: Member[] = [];
  private published = false;
  private settling: { generation: number; members: Member[]; deadline: number; anyAsked: boolean } | undefined;
  private readonly startedAt = performance.now();
  private enoughSince: number | undefined;
  private belowSince: number | undefined;
  private unreadSince: number | undefined;
  private finishing = false;
  private ended: JobEnd | undefined;
  private timer: NodeJS.Timeout | undefined;
  private busy = false;
  private waiters: (() => void)[] = [];

  constructor(private readonly options: CoordinatorOptions) {}

  start(): void {
    this.timer = setInterval(() => void this.tick(), kTickMs);
  }

  /** The store server saw an authenticated connection close: a launcher's, maybe. */
  disconnected(connection: string): void {
    const node = this.nodes.find((n) => n.record.connection === connection);
    if (node === undefined) {
      this.closed.add(connection);
      return;
    }
    // A node that finished says so before it leaves.
    void peek(this.options.store, this.options.keys.done(node.k))
      .then((done) => {
        if (done !== undefined) node.done = true;
      })
      .catch(() => {})
      .finally(() => {
        this.leave(node, "its ringrun's connection to the rendezvous closed (killed, or its host went down)");
        this.wake();
      });
  }

  /** Ends the job for every node: `end` is what each agent prints and exits with. */
  end(code: number, lines: string[]): void {
    if (this.ended !== undefined) return;
    this.ended = { code, lines };
    clearInterval(this.timer);
    this.options.store.set(this.options.keys.end, encode(this.ended)).catch(() => {});
    this.wake();
  }

  /** Resolves once every node but `self` whose workers joined has finished or left (or the job ended). */
  async othersFinished(self: number): Promise<void> {
    while (this.ended === undefined && this.nodes.some((n) => n.k !== self && n.joined && !n.done && n.gone === undefined)) {
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  /** Resolves once every node but `self` has finished or left: the store may close. */
  async othersGone(self: number): Promise<void> {
    while (this.nodes.some((n) => n.k !== self && !n.done && n.gone === undefined)) {
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const resolve of waiters) resolve();
  }

  private async tick(): Promise<void> {
    if (this.busy || this.ended !== undefined) return;
    this.busy = true;
    try {
      await this.poll();
      await this.decide();
    } catch (error) {
      this.end(1, [`job failed: the rendezvous store failed: ${(error as Error).message}`]);
    } finally {
      this.busy = false;
      this.wake();
    }
  }

  /** Reads what changed: new nodes, heartbeats, workers that reached the store or ended, nodes done. */
  private async poll(): Promise<void> {
    const { store, keys, rdzv, leaseMs } = this.options;
    const now = performance.now();
    const count = await store.add(keys.nodes, 0);
    while (this.nodes.length < count) {
      const k = this.nodes.length;
      const bytes = await peek(store, keys.node(k));
      if (bytes === undefined) {
        // An agent that took index k and died before saying where it runs must not hold up the others.
        this.unreadSince ??= now;
        if (now - this.unreadSince < leaseMs) break;
      }
      this.unreadSince = undefined;
      const record = bytes === undefined ? { host: '?', address: '?', connection: '' } : decode<NodeRecord>(bytes);
      const node: NodeState = {
        k,
        record,
        beats: 0,
        heardAt: now,
        admitted: false,
        waitingSaid: false,
        ready: false,
        joined: false,
        done: false,
        workers: Array.from({ length: rdzv.nprocPerNode }, (_, j) => workerId(k, j)),
        readyWorkers: new Set(),
        exits: new Map(),
        lost: new Set(),
      };
      this.nodes.push(node);
      this.options.debug(`elastic: node ${k} registered (${record.host}, ${record.address})`);
      if (bytes === undefined) this.leave(node, 'it registered but never said where it runs');
      else if (this.closed.has(record.connection)) this.leave(node, "its ringrun's connection to the rendezvous closed");
    }
    for (const node of this.live()) {
      const beats = await store.add(keys.beat(node.k), 0);
      if (beats !== node.beats) {
        node.beats = beats;
        node.heardAt = now;
      } else if (now - node.heardAt > leaseMs) {
        this.leave(node, `its ringrun was not heard from for ${leaseMs} ms (--io-timeout): cut off, frozen or gone`);
        continue;
      }
      if (!node.admitted) continue;
      for (const id of node.workers) {
        if (!node.exits.has(id)) {
          const code = await peek(store, keys.gone(id));
          if (code !== undefined) {
            node.exits.set(id, decode<number>(code));
            if (decode<number>(code) === 0) this.finishing = true;
          }
        }
        if (!node.ready && !node.readyWorkers.has(id) && (await peek(store, readyKey(rdzv.jobId, id))) !== undefined) {
          node.readyWorkers.add(id);
        }
      }
      if (!node.ready && node.readyWorkers.size > 0) {
        node.ready = node.workers.every((id) => node.readyWorkers.has(id) || node.exits.has(id));
      }
      if ((await peek(store, keys.done(node.k))) !== undefined) node.done = true;
    }
  }

  private async decide(): Promise<void> {
    if (!this.finishing) await this.admit();
    if (this.settling !== undefined) await this.settle();
    else if (this.generation === 0) await this.first();
    else if (this.published) await this.watch();
    else await this.pending();
  }

  /** Lets waiting nodes start their workers, up to MAX nodes at once. */
  private async admit(): Promise<void> {
    const { store, keys, rdzv } = this.options;
    let running = this.live().filter((n) => n.admitted).length;
    for (const node of this.live()) {
      if (node.admitted) continue;
      if (running >= rdzv.maxNodes) {
        if (!node.waitingSaid)
          this.options.log(`elastic: node ${node.k} (${node.record.host}) waits: ${running} nodes run, the most --nnodes allows`);
        node.waitingSaid = true;
        continue;
      }
      node.admitted = true;
      running++;
      await store.set(keys.admit(node.k), encode(1));
    }
  }

  /** The first round: MIN ready nodes, then up to the last call for more (none with MAX). */
  private async first(): Promise<void> {
    const { rdzv, startTimeoutMs, lastCallMs } = this.options;
    const ready = this.newcomers();
    const now = performance.now();
    if (ready.length < rdzv.minNodes) {
      this.enoughSince = undefined;
      if (now - this.startedAt > startTimeoutMs) {
        this.end(124, [
          `job failed: ${ready.length} node${ready.length === 1 ? '' : 's'} ready within the start-up timeout (--start-timeout ${startTimeoutMs} ms), fewer than --nnodes ${rdzv.minNodes}:${rdzv.maxNodes} needs`,
        ]);
      }
      return;
    }
    this.enoughSince ??= now;
    if (ready.length < rdzv.maxNodes && now - this.enoughSince < lastCallMs) return;
    await this.publish(this.join(ready));
  }

  /** A running generation: it breaks (a worker asked for the next one) or grows by the nodes that became ready. */
  private async watch(): Promise<void> {
    const { store, rdzv } = this.options;
    const n = this.generation;
    const broken = (await peek(store, brokenKey(rdzv.jobId, n))) !== undefined;
    if (broken || this.members.every((m) => this.excluded(m))) {
      this.settling = {
        generation: n,
        members: this.members,
        // Until one asks, the survivors may still be noticing a silent peer: up to the I/O timeout after it went silent.
        deadline: performance.now() + 2 * this.options.leaseMs,
        anyAsked: false,
      };
      await this.settle();
      return;
    }
    // A member gone means a break is coming: the next generation is decided then.
    if (this.finishing || this.members.some((m) => this.excluded(m))) return;
    const newcomers = this.newcomers();
    if (newcomers.length > 0) await this.publish([...this.members, ...this.join(newcomers)]);
  }

  /** The workers of the broken generation that asked for the next one go on; the silent ones are lost at the deadline. */
  private async settle(): Promise<void> {
    const settling = this.settling;
    if (settling === undefined) return;
    const { store, keys, rdzv, leaseMs } = this.options;
    const going: Member[] = [];
    const silent: Member[] = [];
    for (const member of settling.members) {
      if (this.excluded(member)) continue;
      const asked = await peek(store, leftKey(rdzv.jobId, settling.generation, member.id));
      (asked !== undefined ? going : silent).push(member);
    }
    const now = performance.now();
    if (!settling.anyAsked && going.length > 0) {
      settling.anyAsked = true;
      settling.deadline = Math.min(settling.deadline, now + leaseMs);
    }
    if (silent.length > 0 && now < settling.deadline) return;
    this.settling = undefined;
    for (const member of silent) {
      const node = this.nodeOf(member);
      this.options.log(
        `elastic: worker ${member.id} of node ${node.k} (${node.record.host}) did not ask for a new generation within ${leaseMs} ms of the others (generation ${settling.generation} failed): it is lost`,
      );
      node.lost.add(member.id);
      await store.set(keys.stop(member.id), encode(1));
    }
    this.members = going;
    this.published = false;
    await this.pending();
  }

  /** Between generations: the survivors and the nodes that became ready, published once they are MIN nodes. */
  private async pending(): Promise<void> {
    const { rdzv, timeoutMs } = this.options;
    const members = [...this.members.filter((m) => !this.excluded(m)), ...(this.finishing ? [] : this.join(this.newcomers()))];
    this.members = members;
    const nodes = new Set(members.map((m) => this.nodeOf(m).k)).size;
    if (nodes >= rdzv.minNodes) {
      await this.publish(members);
      return;
    }
    const now = performance.now();
    this.belowSince ??= now;
    if (now - this.belowSince < timeoutMs) return;
    this.end(1, [
      `job failed: ${nodes} node${nodes === 1 ? '' : 's'} left, below --nnodes ${rdzv.minNodes}:${rdzv.maxNodes}, and none came within --elastic-timeout (${timeoutMs} ms)`,
    ]);
  }

  private async publish(members: Member[]): Promise<void> {
    this.belowSince = undefined;
    this.members = members;
    this.published = true;
    const generation = { number: ++this.generation, members };
    const nodes = [...new Set(members.map((m) => this.nodeOf(m).k))];
    this.options.log(
      `elastic: generation ${generation.number}: ${members.length} worker${members.length === 1 ? '' : 's'} on node${nodes.length === 1 ? '' : 's'} ${nodes.join(', ')}`,
    );
    await publishGeneration(this.options.store, this.options.rdzv.jobId, generation);
  }

  /** Live ready nodes whose workers are in no generation yet. */
  private newcomers(): NodeState[] {
    return this.live().filter((n) => n.ready && !n.joined);
  }

  /** The workers of `nodes` that reached the store and still run, node by node; the nodes count as joined. */
  private join(nodes: readonly NodeState[]): Member[] {
    const members: Member[] = [];
    for (const node of nodes) {
      node.joined = true;
      for (const id of node.workers) {
        if (node.readyWorkers.has(id) && !node.exits.has(id)) members.push({ id, host: node.record.address });
      }
    }
    return members;
  }

  private live(): NodeState[] {
    return this.nodes.filter((n) => n.gone === undefined && !n.done);
  }

  private nodeOf(member: Member): NodeState {
    const k = Number(/^n(\d+)w/.exec(member.id)?.[1]);
    return this.nodes[k] as NodeState;
  }

  /** A member that will not ask for the next generation: its node left, it ended, or it was lost. */
  private excluded(member: Member): boolean {
    const node = this.nodeOf(member);
    return node.gone !== undefined || node.exits.has(member.id) || node.lost.has(member.id);
  }

  private leave(node: NodeState, why: string): void {
    if (node.gone !== undefined || node.done) return;
    node.gone = why;
    if (this.ended === undefined)
      this.options.log(`elastic: node ${node.k} (${node.record.host}, ${node.record.address}) left: ${why}`);
  }
}
