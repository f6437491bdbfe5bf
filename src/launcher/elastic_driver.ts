/**
 * `ringrun --elastic`: the launcher as the elastic driver (Horovod's ElasticDriver). It hosts the
 * rendezvous store, which must outlive every rank, starts the workers on this machine, and keeps
 * the membership (rendezvous/generations.ts):
 *
 * - A worker that fails (any exit but 0) leaves the job: the driver publishes the next generation
 *   without it, and the survivors, whose collectives failed, form that job (elastic/run.ts). Below
 *   `--min-np` workers it waits up to `--elastic-timeout` for the discovery script to offer slots,
 *   then fails the job with a report.
 * - The discovery script (`--host-discovery-script`, run every `--discovery-interval`) prints the
 *   slots available, one `host:slots` line each; the driver starts workers on new local slots, up
 *   to `--max-np`, and publishes a generation that appends them. The running workers let them in
 *   at their next commit.
 * - The job succeeds once every worker has exited 0.
 * - With `--browser K` the workers are also browser tabs (browser/): ringrun serves the page,
 *   bridges its store to the tabs, and every worker runs the web backend. The first generation
 *   waits for the `-np` Node workers and K tabs (for at most the start-up timeout, then it goes
 *   with --min-np or more); after that a page that opens the join URL is a new worker, joining
 *   at the next commit as a discovered slot would, up to --max-np; a tab that closes is a worker
 *   that failed.
 */
import { execFile } from 'node:child_process';
import { kEnv } from '../core/env_names.js';
import { InvalidArgumentError } from '../core/errors.js';
import { JobKey } from '../rendezvous/auth.js';
import { type Generation, type Member, publishGeneration } from '../rendezvous/generations.js';
import { TcpStoreClient, TcpStoreServer } from '../rendezvous/tcp_store.js';
import { allocatorEnv, formatHostPort, kLocalAddress, newJobId, newSecret, settingsEnv } from './env_contract.js';
import { describeExit, signalExitCode } from './failure_report.js';
import { isLocalHost } from './hosts.js';
import type { ElasticSettings, LaunchConfig, RunIo } from './launch_config.js';

export type { ElasticSettings } from './launch_config.js';

import type { WebSocket } from 'ws';
import { BrowserRank } from './browser/browser_rank.js';
import { acceptPage } from './browser/browser_ranks.js';
import { BrowserSite } from './browser/browser_site.js';
import { kPagePaths } from './browser/page_protocol.js';
import { dashboardEnv, reportForwarder } from './browser/report_forwarder.js';
import { RankProcess } from './rank_process.js';
import type { RankExit, RankRunner } from './rank_runner.js';

const kDefaultStartTimeoutMs = 30_000;

interface Worker {
  member: Member;
  process: RankRunner;
}

/** Runs an elastic job; resolves to ringrun's exit code. */
export async function runElastic(config: LaunchConfig, elastic: ElasticSettings, io: RunIo): Promise<number> {
  const driver = new ElasticDriver(config, elastic, io);
  return driver.run();
}

class ElasticDriver {
  private readonly jobId = newJobId();
  private readonly secret = newSecret();
  private readonly workers = new Map<string, Worker>();
  /** The members of the latest generation, in rank order. */
  private members: Member[] = [];
  private generation = 0;
  private nextWorker = 0;
  private store: { server: TcpStoreServer; client: TcpStoreClient; address: string } | undefined;
  private belowSince: number | undefined;
  private outcome: ((code: number) => void) | undefined;
  private publishing: Promise<void> = Promise.resolve();
  private stopped = false;
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
    const key = new JobKey(this.secret);
    const server = new TcpStoreServer({ host: kLocalAddress, port: 0, key });
    const listening = await server.listen();
    const address = formatHostPort(kLocalAddress, listening.port);
    const client = await TcpStoreClient.connect({ host: kLocalAddress, port: listening.port, connectTimeoutMs: 10_000, key });
    this.store = { server, client, address };
    const browser = this.config.browser;
    if (browser !== undefined) {
      try {
        this.site = await BrowserSite.start({
          settings: browser,
          store: { port: listening.port, key },
          address: this.config.address,
          env: this.io.env,
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
      for (let i = 0; i < this.config.np; i++) this.startWorker();
      this.publishFirst(false);
      if (this.site !== undefined && browser !== undefined) {
        const site = this.site;
        site.open(browser.count).catch((error: Error) => this.finish(1, `cannot open the browser ranks: ${error.message}`));
      }
      return await done;
    } finally {
      clearTimeout(firstDeadline);
      clearInterval(discovery);
      clearInterval(watchdog);
      unsubscribe();
      for (const worker of this.workers.values()) worker.process.stop('SIGKILL');
      await this.site?.close();
      await client.close();
      await server.close();
    }
  }

  private startTimeoutMs(): number {
    return this.config.settings.startTimeoutMs ?? kDefaultStartTimeoutMs;
  }

  /**
   * The first generation: once the -np Node workers and the --browser tabs are all there, or, at
   * the start-up timeout (`late`), with whoever came when that is at least --min-np.
   */
  private publishFirst(late: boolean): void {
    if (this.generation > 0 || this.stopped) return;
    const wanted = this.config.np + (this.config.browser?.count ?? 0);
    const members = [...this.workers.values()].map((w) => w.member);
    if (members.length >= wanted || (late && members.length >= this.elastic.minNp)) this.publish(members);
    else if (late) {
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
    const worker: Worker = { member: { id, host: `tab ${id}` }, process: tab };
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

  private startWorker(): Worker {
    const number = this.nextWorker++;
    const id = `w${number}`;
    const member: Member = { id, host: 'localhost' };
    const env: NodeJS.ProcessEnv = {
      ...this.io.env,
      ...allocatorEnv(this.io.env),
      [kEnv.elasticWorker]: id,
      [kEnv.storeAddr]: this.store?.address ?? '',
      [kEnv.jobId]: this.jobId,
      [kEnv.secret]: this.secret,
      [kEnv.address]: this.site?.nodeAddress ?? kLocalAddress,
      ...(this.site !== undefined && { [kEnv.backend]: 'web' }),
      ...settingsEnv(this.config.settings),
      [kEnv.startTimeoutMs]: String(this.workerStartTimeoutMs()),
    };
    // Rank and size come from the generations; stale ones in ringrun's environment would mislead.
    for (const name of [kEnv.rank, kEnv.size, kEnv.localRank, kEnv.localSize, kEnv.crossRank, kEnv.crossSize]) delete env[name];
    const process = new RankProcess({
      rank: number,
      command: this.config.command,
      args: this.config.args,
      env,
      sinks: { stdout: this.io.stdout, stderr: this.io.stderr },
      tailLines: 10,
    });
    const worker: Worker = { member, process };
    this.workers.set(id, worker);
    void process.exited.then((exit) => this.onExit(worker, exit));
    return worker;
  }

  /** Publishes the next generation (in order: each waits for the one before). */
  private publish(members: Member[]): void {
    this.members = members;
    const generation: Generation = { number: ++this.generation, members };
    this.io.debug(`elastic: generation ${generation.number}: ${members.map((m) => m.id).join(', ')}`);
    const store = this.store;
    if (!store) return;
    this.publishing = this.publishing
      .then(() => publishGeneration(store.client, this.jobId, generation))
      .catch((error) => this.finish(1, `elastic: the store failed: ${(error as Error).message}`));
  }

  private onExit(worker: Worker, exit: RankExit): void {
    this.workers.delete(worker.member.id);
    if (this.stopped) return;
    if (exit.code === 0) {
      if (this.workers.size === 0) this.finish(0, `all workers finished`);
      return;
    }
    const rank = this.members.findIndex((m) => m.id === worker.member.id);
    const left = this.members.filter((m) => m.id !== worker.member.id);
    this.io.log(
      `elastic: worker ${worker.member.id}${rank >= 0 ? ` (rank ${rank} of generation ${this.generation})` : ''} ${describeExit(exit)}; ${left.length} left`,
    );
    if (rank < 0) return;
    if (left.length === 0) {
      this.finish(1, 'elastic: every worker failed');
      return;
    }
    // Below --min-np the survivors wait (their next generation is not published) for new slots.
    if (left.length >= this.elastic.minNp) this.publish(left);
    else this.members = left;
    this.checkBelowMin();
  }

  /** Below --min-np: the clock runs; past --elastic-timeout the job fails. */
  private checkBelowMin(): void {
    if (this.stopped) return;
    if (this.members.length >= this.elastic.minNp) {
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

  /** Runs the discovery script; new local slots get workers (up to --max-np), appended in a new generation. */
  private async discover(): Promise<void> {
    const script = this.elastic.discoveryScript;
    if (script === undefined || this.stopped) return;
    let slots: number;
    try {
      slots = localSlots(await runScript(script, this.elastic.discoveryIntervalMs * 5));
    } catch (error) {
      this.io.log(`elastic: the discovery script failed: ${(error as Error).message}`);
      return;
    }
    const running = this.members.length;
    const wanted = Math.min(slots, this.elastic.maxNp);
    if (wanted <= running || this.stopped) return;
    const added = Array.from({ length: wanted - running }, () => this.startWorker().member);
    this.io.log(`elastic: ${added.length} new slot${added.length === 1 ? '' : 's'}: ${running} -> ${wanted} workers`);
    this.grow(added);
  }

  /** Appends new workers in the next generation (the running ones let them in at their next commit). */
  private grow(added: Member[]): void {
    const members = [...this.members, ...added];
    if (added.some((m) => m.host.startsWith('tab '))) {
      this.io.log(`elastic: a browser tab joined: ${this.members.length} -> ${members.length} workers`);
    }
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
}

/** The slots the discovery script offers on this machine (other hosts are not supported yet). */
function localSlots(output: string): number {
  let slots = 0;
  for (const line of output.split('\n')) {
    const text = line.trim();
    if (text === '' || text.startsWith('#')) continue;
    const match = /^([^:\s]+)(?::(\d+))?$/.exec(text);
    if (!match) throw new InvalidArgumentError(`discovery script line '${text}' is not host[:slots]`);
    if (!isLocalHost(match[1] as string))
      throw new InvalidArgumentError(`elastic jobs run on this machine only; the discovery script offers ${text}`);
    slots += Number(match[2] ?? 1);
  }
  return slots;
}

function runScript(path: string, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(path, [], { timeout: timeoutMs }, (error, stdout) => (error ? reject(error) : resolve(stdout)));
  });
}
