/**
 * `ringrun --elastic`: the launcher as the elastic driver (Horovod's ElasticDriver). It hosts the
 * rendezvous store, which must outlive every rank, starts the workers on the hosts (this machine
 * directly, others over ssh as run_job.ts does), and keeps the membership
 * (rendezvous/generations.ts):
 *
 * - A generation breaks when one of its workers fails (any exit but 0) or one asks for the next
 *   generation (its collectives failed: a peer died or its host was cut off). The driver then
 *   settles who goes on: the workers that ask for the next generation within the I/O timeout of
 *   the first that did (twice that when none has yet: the time a live worker takes to notice a
 *   silent peer); one still running that has not asked by then is lost (its host cut off, or
 *   frozen) and stopped. The next generation lists the
 *   ones that asked, in their order, and the survivors form that job (elastic/run.ts). Below
 *   `--min-np` workers it waits up to `--elastic-timeout` for the discovery script to offer
 *   slots, then fails the job with a report.
 * - Hosts come from -H, --hostfile or the discovery script (`--host-discovery-script`, run every
 *   `--discovery-interval`: one `host:slots` line each). The driver starts workers on free slots
 *   of hosts not in a cool-down (elastic_hosts.ts has the blacklist rule), up to `--max-np`; a new
 *   worker joins once it has reached the store, in a generation that appends it, which the
 *   running workers let in at their next commit. A host the script stops listing leaves: its
 *   workers are stopped.
 * - The job succeeds once every worker has exited 0.
 * - With `--browser K` the workers are also browser tabs (browser/): ringrun serves the page,
 *   bridges its store to the tabs, and every worker runs the web backend. The first generation
 *   waits for the `-np` Node workers and K tabs (for at most the start-up timeout, then it goes
 *   with --min-np or more); after that a page that opens the join URL is a new worker, joining
 *   at the next commit as a discovered slot would, up to --max-np; a tab that closes is a worker
 *   that failed.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { kEnv } from '../core/env_names.js';
import { InvalidArgumentError, TimeoutError } from '../core/errors.js';
import { JobKey } from '../rendezvous/auth.js';
import { brokenKey, type Generation, leftKey, type Member, publishGeneration, readyKey } from '../rendezvous/generations.js';
import { TcpStoreClient, TcpStoreServer } from '../rendezvous/tcp_store.js';
import { ElasticHosts, kThisHost, parseDiscovered } from './elastic_hosts.js';
import { type StorePlace, spawnWorker, stopWorkers, storePlace } from './elastic_workers.js';
import { formatHostPort, kLocalAddress, newJobId, newSecret, settingsEnv } from './env_contract.js';
import { describeExit, signalExitCode } from './failure_report.js';
import type { HostSlots } from './hosts.js';
import { isLocalHost } from './hosts.js';
import type { ElasticSettings, LaunchConfig, RunIo } from './launch_config.js';
import { envMs, forwardedEnv } from './run_job.js';

export type { ElasticSettings } from './launch_config.js';

import type { WebSocket } from 'ws';
import { BrowserRank } from './browser/browser_rank.js';
import { acceptPage } from './browser/browser_ranks.js';
import { BrowserSite } from './browser/browser_site.js';
import { kPagePaths } from './browser/page_protocol.js';
import { dashboardEnv, reportForwarder } from './browser/report_forwarder.js';
import type { RankExit, RankRunner } from './rank_runner.js';

const kDefaultStartTimeoutMs = 30_000;
const kDefaultIoTimeoutMs = 30_000;
/** How often a settling driver asks the store which workers asked for the next generation. */
const kSettlePollMs = 10;
/** A generation's break is watched with gets this long, asked again until the generation is over. */
const kWatchMs = 86_400_000;

interface Worker {
  member: Member;
  process: RankRunner;
  /** Stopped on purpose: lost, its host no longer listed, or it never reached the store. */
  leaving?: 'lost' | 'unlisted' | 'unready';
  /** It has reached the store (a tab: from the start), so a generation may list it. */
  ready: boolean;
}

/** Runs an elastic job; resolves to ringrun's exit code. */
export async function runElastic(config: LaunchConfig, elastic: ElasticSettings, io: RunIo): Promise<number> {
  const driver = new ElasticDriver(config, elastic, io);
  return driver.run();
}

class ElasticDriver {
  private readonly jobId = newJobId();
  private readonly secret = newSecret();
  /** The first line of every remote worker's session script (remote_shell.ts). */
  private readonly marker = `ringrun-started-${randomBytes(12).toString('hex')}`;
  private readonly workers = new Map<string, Worker>();
  private readonly hosts = new ElasticHosts(isLocalHost);
  /** The members of the latest generation (published), or the ones waiting for the next (below --min-np), in rank order. */
  private members: Member[] = [];
  private published = false;
  /** New workers that reached the store while the driver settled a break: they join the next generation. */
  private joining: Member[] = [];
  /** A broken generation whose survivors the driver is finding out. */
  private settling:
    | { generation: number; members: Member[]; deadline: number; anyAsked: boolean; timer?: NodeJS.Timeout }
    | undefined;
  private generation = 0;
  private nextWorker = 0;
  private initialWorkers = 0;
  private startUpOver = false;
  private store: { server: TcpStoreServer; client: TcpStoreClient; place: StorePlace } | undefined;
  private forwarded: Record<string, string> = {};
  private readonly refusedHosts = new Set<string>();
  private belowSince: number | undefined;
  private outcome: ((code: number) => void) | undefined;
  private publishing: Promise<void> = Promise.resolve();
  private stopped = false;
  /** A worker has finished (exit 0): the job is ending, and gets no new workers. */
  private finishing = false;
  /** --browser: the page, its scripts and the store bridge for the tabs. */
  private site: BrowserSite | undefined;
  /** --browser with --dashboard: where the tabs' reports go (null: nowhere). */
  private forwardReport: ((rank: BrowserRank, body: string) => void) | null | undefined;

  constructor(
    private readonly config: LaunchConfig,
    private readonly elastic: ElasticSettings,
    private readonly io: RunIo,
  ) {}

  async run(): Promise<number> {
    const { minNp, maxNp } = this.elastic;
    if (minNp < 1 || minNp > maxNp || this.config.np < minNp || this.config.np > maxNp) {
      this.io.log(`--elastic needs --min-np <= -np <= --max-np, got ${minNp} <= ${this.config.np} <= ${maxNp}`);
      return 2;
    }
    let place: StorePlace;
    let initial: string[];
    try {
      this.forwarded = forwardedEnv(this.config, this.io.env);
      const listed = await this.initialHosts();
      this.hosts.list(listed);
      initial = this.place();
      place = await storePlace(this.config, this.hosts, listed);
    } catch (error) {
      this.io.log((error as Error).message);
      return error instanceof InvalidArgumentError ? 2 : 1;
    }
    const key = new JobKey(this.secret);
    const server = new TcpStoreServer({ host: place.bind, port: 0, key });
    let listening: { port: number };
    try {
      listening = await server.listen();
    } catch (error) {
      this.io.log(`elastic: cannot host the store on ${place.bind}: ${(error as Error).message}`);
      return 1;
    }
    const client = await TcpStoreClient.connect({
      host: place.bind === '0.0.0.0' ? kLocalAddress : place.bind,
      port: listening.port,
      connectTimeoutMs: 10_000,
      key,
    });
    this.store = { server, client, place: { ...place, advertise: formatHostPort(place.advertise, listening.port) } };
    this.io.debug(`elastic: store at ${this.store.place.advertise} (bound to ${place.bind})`);
    const browser = this.config.browser;
    if (browser !== undefined) {
      try {
        this.site = await BrowserSite.start({
          settings: browser,
          store: { port: listening.port, key },
          address: this.config.address,
          env: this.io.env,
          ...(this.io.guard && { guard: this.io.guard }),
          onControl: (socket) => this.onPage(socket),
          log: this.io.log,
          debug: this.io.debug,
        });
      } catch (error) {
        this.io.log((error as Error).message);
        await client.close();
        await server.close();
        return error instanceof InvalidArgumentError ? 2 : 1;
      }
    }
    const done = new Promise<number>((resolve) => {
      this.outcome = resolve;
    });
    const unsubscribe = this.io.onInterrupt((signal) => this.finish(signalExitCode(signal), `interrupted by ${signal}`));
    const discovery =
      this.elastic.discoveryScript === undefined
        ? undefined
        : setInterval(() => void this.discover(), this.elastic.discoveryIntervalMs);
    const watchdog = setInterval(() => this.checkBelowMin(), Math.min(1000, this.elastic.timeoutMs));
    // The first generation waits for the tabs too, but not past the start-up timeout.
    const firstDeadline = setTimeout(() => this.publishFirst(true), this.startTimeoutMs());
    try {
      this.initialWorkers = initial.length;
      for (const host of initial) void this.awaitReady(this.startWorker(host));
      if (this.site !== undefined && browser !== undefined) {
        const site = this.site;
        site.open(browser.count).catch((error: Error) => this.finish(1, `cannot open the browser ranks: ${error.message}`));
      }
      return await done;
    } finally {
      clearTimeout(firstDeadline);
      clearTimeout(this.settling?.timer);
      clearInterval(discovery);
      clearInterval(watchdog);
      unsubscribe();
      await this.stopAll();
      await this.site?.close();
      await client.close();
      await server.close();
    }
  }

  /** -H or --hostfile; else the discovery script's first answer; else -np slots on this machine. */
  private async initialHosts(): Promise<HostSlots[]> {
    if (this.config.hosts !== undefined) return this.config.hosts;
    const script = this.elastic.discoveryScript;
    if (script === undefined) return [{ host: kThisHost, slots: this.config.np }];
    let output: string;
    try {
      output = await runScript(script, Math.max(this.elastic.discoveryIntervalMs * 5, 10_000));
    } catch (error) {
      throw new Error(`--host-discovery-script ${script} failed: ${(error as Error).message}`);
    }
    try {
      return parseDiscovered(output);
    } catch (error) {
      throw new InvalidArgumentError(`--host-discovery-script ${script}: ${(error as Error).message}`);
    }
  }

  /** The hosts of the first -np workers: the slots filled host by host, as placement.ts does. */
  private place(): string[] {
    const hosts: string[] = [];
    for (const { host, free } of this.hosts.free(new Map(), performance.now())) {
      for (let i = 0; i < free && hosts.length < this.config.np; i++) hosts.push(host);
    }
    if (hosts.length < this.config.np) {
      const from = this.config.hosts !== undefined ? 'the hosts' : 'the discovery script';
      throw new InvalidArgumentError(`-np ${this.config.np} is more than the ${hosts.length} slots of ${from}`);
    }
    return hosts;
  }

  private startTimeoutMs(): number {
    return this.config.settings.startTimeoutMs ?? kDefaultStartTimeoutMs;
  }

  /** How long a live worker may take to notice that its generation broke: the I/O timeout its silent-peer checks use. */
  private settleMs(): number {
    return this.config.settings.ioTimeoutMs ?? envMs(this.io.env[kEnv.ioTimeoutMs]) ?? kDefaultIoTimeoutMs;
  }

  /**
   * The first generation: once the -np Node workers have reached the store and the --browser tabs
   * are all there, or, at the start-up timeout (`late`), with whoever came when that is at least --min-np.
   */
  private publishFirst(late: boolean): void {
    if (this.generation > 0 || this.stopped) return;
    // Past the start-up timeout, a worker that arrives late is enough once --min-np are there.
    if (late) this.startUpOver = true;
    const wanted = this.initialWorkers + (this.config.browser?.count ?? 0);
    // Only workers that reached the store: a host cut off during start-up would hold up the first mesh.
    const members = [...this.workers.values()].filter((w) => w.ready && w.leaving === undefined).map((w) => w.member);
    if ((members.length >= wanted || this.startUpOver) && members.length >= this.elastic.minNp) this.publish(members);
    else if (this.startUpOver) {
      this.members = members;
      this.checkBelowMin();
    }
  }

  /** A page joins: a new worker (a tab), in the first generation or the next one. */
  private onPage(socket: WebSocket): void {
    acceptPage(socket, this.io.debug, () => {
      if (this.stopped) return 'the job has ended';
      if (this.workers.size >= this.elastic.maxNp) return `the job has its --max-np ${this.elastic.maxNp} workers`;
      const worker = this.startTab();
      if (this.generation === 0) this.publishFirst(false);
      else this.grow([worker.member]);
      return worker.process as BrowserRank;
    });
  }

  /** A browser tab as a worker: its environment is the page's assignment. */
  private startTab(): Worker {
    const number = this.nextWorker++;
    const id = `w${number}`;
    const site = this.site as BrowserSite;
    const browser = this.config.browser;
    const env: Record<string, string> = {
      [kEnv.elasticWorker]: id,
      [kEnv.storeUrl]: site.storeUrl,
      [kEnv.jobId]: this.jobId,
      [kEnv.secret]: this.secret,
      [kEnv.backend]: 'web',
      ...settingsEnv(this.config.settings),
      [kEnv.startTimeoutMs]: String(this.workerStartTimeoutMs()),
      ...dashboardEnv(this.io.env),
    };
    const tab = new BrowserRank(
      number,
      { env, args: browser?.args ?? [], programUrl: kPagePaths.program, engineUrl: kPagePaths.engine },
      { stdout: this.io.stdout, stderr: this.io.stderr },
      10,
      this.reports(),
    );
    // Each tab is a host of its own: one rank, its own links.
    const worker: Worker = { member: { id, host: `tab ${id}` }, process: tab, ready: true };
    this.workers.set(id, worker);
    void tab.exited.then((exit) => this.onExit(worker, exit));
    return worker;
  }

  /** With --dashboard, where tabs' reports go (made once). */
  private reports(): ((rank: BrowserRank, body: string) => void) | undefined {
    if (this.forwardReport === undefined) this.forwardReport = reportForwarder(this.io.env) ?? null;
    return this.forwardReport ?? undefined;
  }

  /** A worker waits for its next generation within its start timeout: at least as long as the job may wait for slots. */
  private workerStartTimeoutMs(): number {
    return Math.max(this.startTimeoutMs(), this.elastic.timeoutMs + 5000);
  }

  /** Starts a worker on `host` (kThisHost: this machine; another: over ssh). */
  private startWorker(host: string): Worker {
    const number = this.nextWorker++;
    const id = `w${number}`;
    const member: Member = { id, host };
    const place = this.store?.place;
    const process = spawnWorker(
      {
        config: this.config,
        io: this.io,
        jobId: this.jobId,
        secret: this.secret,
        marker: this.marker,
        storeAddr: place?.advertise ?? '',
        reachable: place?.reachable === true,
        browserNodeAddress: this.site?.nodeAddress,
        forwarded: this.forwarded,
        startTimeoutMs: this.startTimeoutMs(),
        workerStartTimeoutMs: this.workerStartTimeoutMs(),
      },
      number,
      id,
      host,
    );
    const worker: Worker = { member, process, ready: false };
    this.workers.set(id, worker);
    void process.exited.then((exit) => this.onExit(worker, exit));
    return worker;
  }

  /** Publishes the next generation (in order: each waits for the one before), and watches for its break. */
  private publish(members: Member[]): void {
    this.members = members;
    this.published = true;
    const generation: Generation = { number: ++this.generation, members };
    this.io.debug(`elastic: generation ${generation.number}: ${members.map((m) => `${m.id}@${m.host}`).join(', ')}`);
    const store = this.store;
    if (!store) return;
    this.publishing = this.publishing
      .then(() => publishGeneration(store.client, this.jobId, generation))
      .catch((error) => this.finish(1, `elastic: the store failed: ${(error as Error).message}`));
    void this.watchBreak(generation.number);
  }

  /** Waits for a worker of generation `n` to ask for the next one (rendezvous/generations.ts). */
  private async watchBreak(n: number): Promise<void> {
    const client = this.store?.client;
    for (;;) {
      if (client === undefined || this.stopped || n !== this.generation) return;
      try {
        await client.get(brokenKey(this.jobId, n), kWatchMs);
        break;
      } catch (error) {
        if (!(error instanceof TimeoutError)) return; // the store closed: the job is over
      }
    }
    this.broke(n);
  }

  /** Generation `n` broke: find out who goes on (settle). */
  private broke(n: number): void {
    if (this.stopped || !this.published || n !== this.generation || this.settling?.generation === n) return;
    // Until one asks, the survivors may still be noticing a silent peer: up to the I/O timeout after it went silent.
    const deadline = performance.now() + 2 * this.settleMs();
    this.settling = { generation: n, members: this.members, deadline, anyAsked: false };
    void this.settle();
  }

  /**
   * The workers of the broken generation that asked for the next one go on, once every one has
   * either asked, ended or been stopped, or at the deadline: then the ones still silent are lost.
   */
  private async settle(): Promise<void> {
    const settling = this.settling;
    const client = this.store?.client;
    if (settling === undefined || client === undefined || this.stopped) return;
    const going: Member[] = [];
    const silent: Member[] = [];
    try {
      for (const member of settling.members) {
        const worker = this.workers.get(member.id);
        if (worker === undefined || worker.leaving !== undefined) continue;
        ((await asked(client, leftKey(this.jobId, settling.generation, member.id))) ? going : silent).push(member);
      }
    } catch (error) {
      this.finish(1, `elastic: the store failed: ${(error as Error).message}`);
      return;
    }
    if (this.settling !== settling || this.stopped) return;
    if (!settling.anyAsked && going.length > 0) {
      // A live worker hears of the break from the first that asked (its links close) within the I/O timeout.
      settling.anyAsked = true;
      settling.deadline = Math.min(settling.deadline, performance.now() + this.settleMs());
    }
    if (silent.length > 0 && performance.now() < settling.deadline) {
      settling.timer = setTimeout(() => void this.settle(), kSettlePollMs);
      return;
    }
    this.settling = undefined;
    for (const member of silent) {
      const worker = this.workers.get(member.id) as Worker;
      this.io.log(
        `elastic: worker ${member.id} on ${member.host} did not ask for a new generation within ${this.settleMs()} ms of the others (generation ${settling.generation} failed): it is lost`,
      );
      this.leave(worker, 'lost');
      this.hostFailed(member.host, settling.generation);
    }
    this.next(going);
  }

  /** The next membership: `base` and the new workers ready to join; published unless below --min-np. */
  private next(base: Member[]): void {
    const members = [...base, ...this.joining];
    this.joining = [];
    if (members.length === 0 && !this.anyWorking()) {
      this.finish(1, 'elastic: every worker failed');
      return;
    }
    // Below --min-np the survivors wait (their next generation is not published) for new slots.
    if (members.length >= this.elastic.minNp) this.publish(members);
    else {
      this.members = members;
      this.published = false;
    }
    this.checkBelowMin();
  }

  /** Whether a worker runs that was not stopped on purpose. */
  private anyWorking(): boolean {
    return [...this.workers.values()].some((w) => w.leaving === undefined);
  }

  /** Stops a worker on purpose: its exit is then no failure of its own. */
  private leave(worker: Worker, why: NonNullable<Worker['leaving']>): void {
    worker.leaving = why;
    worker.process.stop('SIGTERM');
  }

  /** Counts a failure of `host` (once per generation); from the threshold on, it starts a cool-down. */
  private hostFailed(host: string, generation: number): void {
    if (host.startsWith('tab ')) return;
    const cooldown = this.hosts.fail(host, generation, performance.now());
    if (cooldown !== undefined) {
      this.io.log(
        `elastic: host ${host} has failed ${this.hosts.failures(host)} times: no new workers there for ${cooldown / 1000} s`,
      );
    }
  }

  private onExit(worker: Worker, exit: RankExit): void {
    this.workers.delete(worker.member.id);
    if (this.stopped) return;
    if (exit.code === 0) {
      this.finishing = true;
      // Workers stopped on purpose may take a while to go (a cut-off host's ssh session): stopAll ends them.
      if (!this.anyWorking()) this.finish(0, `all workers finished`);
      return;
    }
    const { id, host } = worker.member;
    this.joining = this.joining.filter((m) => m.id !== id);
    const rank = this.members.findIndex((m) => m.id === id);
    if (worker.leaving !== undefined) this.io.debug(`elastic: worker ${id} (${worker.leaving}) ${describeExit(exit)}`);
    else {
      const left = this.members.filter((m) => m.id !== id && this.workers.has(m.id)).length;
      this.io.log(
        `elastic: worker ${id}${rank >= 0 ? ` (rank ${rank} of generation ${this.generation})` : ''} ${describeExit(exit)}; ${left} left`,
      );
      this.hostFailed(host, this.generation);
    }
    if (this.generation === 0 && !host.startsWith('tab ')) {
      // One of the first workers is gone before the first generation: it waits for the others only.
      this.initialWorkers = Math.max(0, this.initialWorkers - 1);
      if (!this.anyWorking() && this.config.browser === undefined) this.finish(1, 'elastic: every worker failed');
      else this.publishFirst(false);
      return;
    }
    if (rank < 0) return;
    if (this.published) this.broke(this.generation);
    else if (this.settling === undefined) {
      this.members = this.members.filter((m) => m.id !== id);
      if (this.members.length === 0 && !this.anyWorking()) this.finish(1, 'elastic: every worker failed');
      else this.checkBelowMin();
    }
  }

  /** Below --min-np: the clock runs; past --elastic-timeout the job fails. */
  private checkBelowMin(): void {
    if (this.stopped) return;
    if (this.members.length >= this.elastic.minNp || this.settling !== undefined) {
      this.belowSince = undefined;
      return;
    }
    this.belowSince ??= performance.now();
    if (performance.now() - this.belowSince < this.elastic.timeoutMs) return;
    this.finish(
      1,
      `elastic: ${this.members.length} worker${this.members.length === 1 ? '' : 's'} left, below --min-np ${this.elastic.minNp}, ` +
        `and no slot came within ${this.elastic.timeoutMs} ms: the job fails`,
    );
  }

  /**
   * Runs the discovery script: the workers of hosts no longer listed leave; free slots of the
   * listed hosts get new workers (up to --max-np), which join once they reach the store.
   */
  private async discover(): Promise<void> {
    const script = this.elastic.discoveryScript;
    if (script === undefined || this.stopped) return;
    let listed: HostSlots[];
    try {
      listed = parseDiscovered(await runScript(script, this.elastic.discoveryIntervalMs * 5));
    } catch (error) {
      this.io.log(`elastic: the discovery script failed: ${(error as Error).message}`);
      return;
    }
    if (this.stopped) return;
    if (this.store?.place.reachable !== true) listed = listed.filter((h) => this.refuse(h.host));
    for (const host of this.hosts.list(listed)) {
      const leaving = [...this.workers.values()].filter((w) => w.member.host === host && w.leaving === undefined);
      if (leaving.length === 0) continue;
      this.io.log(
        `elastic: host ${host} is no longer listed: its ${leaving.length} worker${leaving.length === 1 ? '' : 's'} leave`,
      );
      for (const worker of leaving) this.leave(worker, 'unlisted');
    }
    const running = new Map<string, number>();
    for (const w of this.workers.values()) {
      if (w.leaving === undefined) running.set(w.member.host, (running.get(w.member.host) ?? 0) + 1);
    }
    if (this.finishing) return;
    const before = [...running.values()].reduce((a, b) => a + b, 0);
    let room = this.elastic.maxNp - before;
    const added: Worker[] = [];
    for (const { host, free } of this.hosts.free(running, performance.now())) {
      for (let i = 0; i < free && room > 0; i++, room--) added.push(this.startWorker(host));
    }
    if (added.length === 0) return;
    this.io.log(
      `elastic: ${added.length} new slot${added.length === 1 ? '' : 's'}: ${before} -> ${before + added.length} workers`,
    );
    for (const worker of added) void this.awaitReady(worker);
  }

  /** On a store bound to loopback, a host other than this machine cannot join: said once per host. */
  private refuse(host: string): boolean {
    if (this.hosts.key(host) === kThisHost) return true;
    if (!this.refusedHosts.has(host)) {
      this.refusedHosts.add(host);
      this.io.log(
        `elastic: the discovery script offers ${host}, but the job's store listens on this machine's loopback (its first hosts were all this machine): give --network-interface to let other hosts join`,
      );
    }
    return false;
  }

  /** A new worker joins once it has reached the store; one that does not within the start-up timeout is stopped. */
  private async awaitReady(worker: Worker): Promise<void> {
    const client = this.store?.client;
    if (client === undefined) return;
    const { id, host } = worker.member;
    let ready = true;
    try {
      await client.get(readyKey(this.jobId, id), this.startTimeoutMs());
    } catch (error) {
      if (!(error instanceof TimeoutError)) return;
      ready = false;
    }
    if (this.stopped || !this.workers.has(id) || worker.leaving !== undefined) return;
    if (ready) {
      worker.ready = true;
      if (this.generation === 0) this.publishFirst(false);
      else this.grow([worker.member]);
      return;
    }
    this.io.log(`elastic: worker ${id} on ${host} did not reach the store within ${this.startTimeoutMs()} ms: stopping it`);
    this.leave(worker, 'unready');
    this.hostFailed(host, this.generation);
  }

  /** Appends new workers in the next generation (the running ones let them in at their next commit). */
  private grow(added: Member[]): void {
    if (added.some((m) => m.host.startsWith('tab '))) {
      this.io.log(`elastic: a browser tab joined: ${this.members.length} -> ${this.members.length + added.length} workers`);
    }
    if (this.settling !== undefined) {
      this.joining.push(...added);
      return;
    }
    const members = [...this.members, ...added];
    if (members.length >= this.elastic.minNp) this.publish(members);
    else this.members = members;
    this.checkBelowMin();
  }

  private finish(code: number, why: string): void {
    if (this.stopped) return;
    this.stopped = true;
    if (code === 0) this.io.debug(why);
    else this.io.log(why);
    for (const worker of this.workers.values()) worker.process.stop('SIGTERM');
    this.outcome?.(code);
  }

  /** Every worker still there: SIGTERM, then SIGKILL after a grace period (elastic_workers.ts). */
  private stopAll(): Promise<void> {
    return stopWorkers([...this.workers.values()].map((worker) => worker.process));
  }
}

/** Whether `key` is set (a get that answers at once). */
async function asked(client: TcpStoreClient, key: string): Promise<boolean> {
  try {
    await client.get(key, 0);
    return true;
  } catch (error) {
    if (error instanceof TimeoutError) return false;
    throw error;
  }
}

function runScript(path: string, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(path, [], { timeout: timeoutMs }, (error, stdout) => (error ? reject(error) : resolve(stdout)));
  });
}
