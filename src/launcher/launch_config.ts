/** What the launcher's front (cli.ts) hands to the ways of running a job (run_job.ts, run_mpi.ts). */
import type { EngineSettings } from './env_contract.js';
import type { HostSlots } from './hosts.js';
import type { ProcessGuard } from './orphan_guard.js';

/** Everything a job needs, validated. */
export interface LaunchConfig {
  np: number;
  /** Hosts and slots (-H or --hostfile); undefined: every rank on this machine. */
  hosts: HostSlots[] | undefined;
  /** The --hostfile path, for mpirun. */
  hostfile: string | undefined;
  command: string;
  args: string[];
  settings: EngineSettings;
  outputDir: string | undefined;
  verbose: boolean;
  backend: 'tcp' | 'mpi';
  ssh: { command: string[]; port?: number; identity?: string };
  /** -x: variables for every rank (remote ones get only these and the contract). */
  env: { name: string; value?: string }[];
  networkInterface: string | undefined;
  address: string | undefined;
  storePort: number | undefined;
  /** ringrun --elastic (elastic_driver.ts). */
  elastic?: ElasticSettings;
  /** Not elastic: how many times a failed job is started again (restarts.ts). */
  maxRestarts: number;
  /** --timeline: one merged trace of every rank's engine is written here. */
  timeline: string | undefined;
  /** The per-node mode (--nnodes, --node-rank, --nproc-per-node, --rdzv-endpoint, --slurm); undefined: one launcher for the job. */
  perNode: PerNodeConfig | undefined;
  /** ringrun --elastic with --nnodes MIN:MAX: one launcher per node, meeting at the endpoint (elastic_nodes/). */
  elasticNodes?: ElasticNodesConfig;
  /** Browser ranks (--browser K), after the -np Node ranks; undefined: none (browser/browser_job.ts). */
  browser?: BrowserSettings;
}

/** ringrun --browser's settings. */
export interface BrowserSettings {
  /** How many browser ranks (tabs); ranks np … np+count-1. */
  count: number;
  /** ringrun opens the tabs in headless Chromium; false: it prints the join URL and waits. */
  headless: boolean;
  /** The program the tabs run (--browser-script; default: the script the Node ranks run). */
  script: string;
  /** Its arguments: the words after the Node ranks' script (rr.programArgs() in a tab). */
  args: string[];
  /** Where the page server listens (--browser-host host[:port]); port 0: a free one. */
  host: string;
  port: number;
  /** --https-cert and --https-key: serve the page (and the ranks' WebSockets) over TLS. */
  tls?: { certFile: string; keyFile: string };
}

/** One launcher per node, as torchrun: this one starts the ranks of node `nodeRank` (run_node.ts). */
export interface PerNodeConfig {
  nnodes: number;
  nodeRank: number;
  nprocPerNode: number;
  /** Where node 0's launcher hosts the launchers' rendezvous store; undefined for one node (a local job). */
  endpoint: { host: string; port: number } | undefined;
  /** Which values came from Slurm's variables, for --verbose ("--nnodes 2 from SLURM_NNODES", ...). */
  fromSlurm: string[];
}

/** The elastic per-node mode (elastic_nodes/): `--elastic --nnodes MIN:MAX --nproc-per-node P --rdzv-endpoint`. */
export interface ElasticNodesConfig {
  minNodes: number;
  maxNodes: number;
  nprocPerNode: number;
  /** The launcher that can bind it hosts the rendezvous store; every launcher and worker connects to it. */
  endpoint: { host: string; port: number };
  /** Every launcher of one job gives the same (--rdzv-id). */
  rdzvId: string;
  /** Once MIN nodes are ready, how long the first round waits for more (--rdzv-last-call). */
  lastCallMs: number;
  /** How long the job may stay below MIN nodes (--elastic-timeout). */
  timeoutMs: number;
}

/** The process-wide things a run uses, passed in so that runs can be tested without a process of their own. */
export interface RunIo {
  env: NodeJS.ProcessEnv;
  cwd: string;
  stderrIsTty: boolean;
  stdout(text: string): void;
  stderr(text: string): void;
  log(message: string): void;
  debug(message: string): void;
  /** Calls `handler` on every interrupt until the returned function is called. */
  onInterrupt(handler: (signal: NodeJS.Signals) => void): () => void;
  /** Stops the ranks' process groups if ringrun dies without stopping them (orphan_guard.ts); none in tests. */
  guard?: ProcessGuard;
}

/** ringrun --elastic's settings (elastic_driver.ts). */
export interface ElasticSettings {
  minNp: number;
  maxNp: number;
  /** Prints `host:slots` lines; unset: the job never grows. */
  discoveryScript: string | undefined;
  discoveryIntervalMs: number;
  /** How long the job may stay below minNp before it fails. */
  timeoutMs: number;
}
