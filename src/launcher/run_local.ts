/**
 * Glue between the parsed command line and a LocalJob: picks the store port, opens the log
 * files, forwards interrupts, and prints the final report. Process-wide things (signal
 * handlers, stdout) come in through RunIo so this stays testable.
 */
import type { LaunchConfig } from './cli.js';
import { formatHostPort, kLocalAddress, newJobId } from './env_contract.js';
import { failureReport, signalExitCode } from './failure_report.js';
import { findFreePort } from './free_port.js';
import { LocalJob } from './local_launcher.js';
import { RankLogFiles } from './rank_log_files.js';

export interface RunIo {
  env: NodeJS.ProcessEnv;
  stdout(text: string): void;
  stderr(text: string): void;
  log(message: string): void;
  debug(message: string): void;
  /** Calls `handler` on every interrupt until the returned function is called. */
  onInterrupt(handler: (signal: NodeJS.Signals) => void): () => void;
}

export async function runLocal(config: LaunchConfig, io: RunIo): Promise<number> {
  // Before the signal handlers go in: until then a signal still ends ringrun the default way.
  let logs: RankLogFiles | undefined;
  if (config.outputDir !== undefined) {
    try {
      logs = new RankLogFiles(config.outputDir, config.np, io.log);
    } catch (error) {
      io.log(`--output-dir ${config.outputDir}: ${(error as Error).message}`);
      return 1;
    }
  }
  let job: LocalJob | undefined;
  let early: NodeJS.Signals | undefined;
  const unsubscribe = io.onInterrupt((signal) => {
    if (job !== undefined) job.interrupt(signal);
    else early ??= signal;
  });
  try {
    let port: number;
    try {
      port = await findFreePort(kLocalAddress);
    } catch (error) {
      io.log(`cannot find a free port on ${kLocalAddress} for the store: ${(error as Error).message}`);
      return 1;
    }
    if (early !== undefined) return signalExitCode(early);
    const contract = {
      size: config.np,
      storeAddr: formatHostPort(kLocalAddress, port),
      jobId: newJobId(),
      settings: config.settings,
    };
    io.debug(`job ${contract.jobId}: ${config.np} ranks of '${config.command}', store at ${contract.storeAddr}`);
    job = new LocalJob({
      command: config.command,
      args: config.args,
      job: contract,
      baseEnv: io.env,
      sinks: (rank) => ({ stdout: io.stdout, stderr: io.stderr, line: logs?.lineSink(rank) }),
      log: io.log,
      debug: io.debug,
    });
    const outcome = await job.finished;
    if (outcome.failure !== undefined) {
      for (const line of failureReport(outcome.failure.exit, outcome.failure.lastLines)) io.log(line);
    } else if (outcome.interruptedBy === undefined) {
      io.debug(`all ${config.np} ranks exited with code 0`);
    }
    return outcome.exitCode;
  } finally {
    unsubscribe();
    await logs?.close();
  }
}
