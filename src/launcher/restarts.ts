/**
 * `ringrun --max-restarts K` (not elastic): a job that fails is stopped as a whole, as always,
 * and started again, up to K times. Each attempt's ranks see RINGREDUCE_RESTART_ATTEMPT (0 first),
 * so a script can resume from its own checkpoint. An interrupted job (Ctrl-C) is not restarted.
 */
import { kEnv } from '../core/env_names.js';
import type { RunIo } from './launch_config.js';

/** Exit codes of a job stopped by a signal to ringrun itself (128 + signal): never restarted. */
const kInterruptCodes = new Set([130, 143, 129]);

export async function withRestarts(maxRestarts: number, run: (attempt: number) => Promise<number>, io: RunIo): Promise<number> {
  for (let attempt = 0; ; attempt++) {
    const code = await run(attempt);
    if (code === 0 || kInterruptCodes.has(code)) return code;
    if (attempt >= maxRestarts) {
      if (maxRestarts > 0) io.log(`the job failed ${attempt + 1} times (--max-restarts ${maxRestarts}): giving up`);
      return code;
    }
    io.log(`the job failed (exit ${code}): starting it again, attempt ${attempt + 1} of ${maxRestarts} restarts`);
  }
}

/** The run's environment with the attempt number for the ranks. */
export function attemptIo(io: RunIo, attempt: number): RunIo {
  return { ...io, env: { ...io.env, [kEnv.restartAttempt]: String(attempt) } };
}
