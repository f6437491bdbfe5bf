/**
 * `npm run bench`: times ringreduce's collectives (allreduce, allgather, broadcast by default;
 * reducescatter, alltoall, reduce, gather and scatter with --op) between real processes, started
 * by the ringrun launcher exactly as a job would be, and prints an nccl-tests style table (see
 * table.ts for algbw, busbw and the CPU per call; spec.ts for what a row's size means for each
 * op). Each rank runs bench/rank.ts, checks its result against one computed on the rank, and
 * reports through a JSON file; this driver merges them, so the time of a row is the slowest
 * rank's mean per call.
 * The rooted ops (broadcast, reduce, gather, scatter) use root 0.
 *
 *   npm run bench -- --op allreduce --sizes 4:256M --ranks 2 --dtype float32 --json out.json
 *   npm run bench -- --op allreduce,reducescatter --sizes 16M --ranks 2
 *   npm run bench -- --op reducescatter,alltoall,reduce,gather,scatter --sizes 4:64M
 *   npm run bench -- --op allreduce --sizes 1M --iters 20 --timeline trace.json
 *
 * Processes, not threads: they compare honestly with OpenMPI and Gloo, whose ranks are
 * processes too. Run ../shared/bench/run-peers.sh for the peers (docs/performance.md).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CommanderError } from 'commander';
import { type BenchArgs, parseBenchArgs } from './args.js';
import { controlLines } from './control_summary.js';
import { idlePercent, machineLine } from './machine.js';
import { benchPlot } from './plot_bench.js';
import { type BenchReport, type BenchSpec, kStepTensorBytes, kStepTensors } from './spec.js';
import { formatTable, mergeReports, type ResultRow } from './table.js';
import { mergeTimelines } from './timeline_merge.js';

const kRoot = fileURLToPath(new URL('../../', import.meta.url));

function runRanks(args: BenchArgs, specPath: string, timelineBase: string | undefined): Promise<number> {
  const env: NodeJS.ProcessEnv = { ...process.env, RINGREDUCE_BACKEND: args.backend };
  if (timelineBase) env.RINGREDUCE_TIMELINE = timelineBase;
  const child = spawn(
    process.execPath,
    [
      join(kRoot, 'bin/ringrun.js'),
      '-np',
      String(args.ranks),
      // The MPI backend needs the ranks started by mpirun (ringrun calls it), not by ringrun itself.
      ...(args.backend === 'mpi' ? ['--backend', 'mpi'] : []),
      ...(args.dashboard ? ['--dashboard'] : []),
      '--',
      process.execPath,
      join(kRoot, 'dist/bench/rank.js'),
      specPath,
    ],
    { env, stdio: ['ignore', 'inherit', 'inherit'] },
  );
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  });
}

/** The training step case's line: the fused step against one allreduce of its bytes, and as one grouped call (slowest rank's means). */
function stepLine(reports: readonly BenchReport[]): { line: string; rows: ResultRow[] } | undefined {
  if (!reports.every((r) => r.member === false || r.step)) return undefined;
  const rows = mergeReports(reports.map((r) => ({ ...r, rows: r.step ?? [] })));
  const [fused, single, grouped] = rows;
  if (!fused || !single) return undefined;
  const ratio = (row: ResultRow) => `${(row.timeUs / single.timeUs).toFixed(2)}x`;
  const failed = rows.some((row) => row.ok === false);
  const us = (row: ResultRow) => (row.timeUs >= 1000 ? `${(row.timeUs / 1000).toFixed(2)} ms` : `${row.timeUs.toFixed(0)} µs`);
  return {
    rows,
    line: `\n# training step: ${kStepTensors} named float32 allreduces of ${kStepTensorBytes / 1024} KiB fused, ${us(fused)} per step (p50 ${(fused.medianUs / 1000).toFixed(2)} ms); one ${(kStepTensors * kStepTensorBytes) / 1024} KiB allreduce ${us(single)}: ${ratio(fused)}${grouped ? `; as one groupedAllreduce ${us(grouped)}: ${ratio(grouped)}` : ''}${failed ? ' (CHECK FAILED)' : ''}`,
  };
}

async function main(): Promise<number> {
  let args: BenchArgs;
  try {
    args = parseBenchArgs(process.argv.slice(2));
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode;
    throw error;
  }
  const dir = mkdtempSync(join(tmpdir(), 'ringreduce-bench-'));
  try {
    const spec: BenchSpec = {
      ops: args.ops,
      sizes: args.sizes,
      dtype: args.dtype,
      iterations: args.iterations,
      warmup: args.warmup,
      check: args.check,
      fresh: args.fresh,
      inPlace: args.inPlace,
      sync: args.sync,
      tensors: args.tensors,
      step: args.step,
      compression: args.compression,
      setRanks: args.setRanks,
      outDir: dir,
    };
    const specPath = join(dir, 'spec.json');
    writeFileSync(specPath, JSON.stringify(spec));
    const machineBefore = machineLine(await idlePercent());
    const timelineBase = args.timeline ? join(dir, 'timeline.json') : undefined;
    const code = await runRanks(args, specPath, timelineBase);
    if (code !== 0) {
      console.error(`bench: ringrun exited with ${code}`);
      return code;
    }
    const reports = Array.from(
      { length: args.ranks },
      (_, r) => JSON.parse(readFileSync(join(dir, `rank.${r}.json`), 'utf8')) as BenchReport,
    );
    const rows = mergeReports(reports);
    const machine = { before: machineBefore, after: machineLine(null) };
    console.log(
      `# ringreduce bench: ${args.ranks} processes, backend ${args.backend}, ${args.fresh ? 'fresh output per call' : args.inPlace ? 'in place (out = the tensor) where the op allows' : 'output reused (out option) where the op has one'}${args.sync ? ', sync calls' : ''}${args.tensors > 1 ? `, ${args.tensors} tensors per step` : ''}${args.compression !== 'none' ? `, compression ${args.compression}` : ''}${args.dashboard ? ', watched by ringrun --dashboard' : ''}\n# before: ${machine.before}`,
    );
    console.log(formatTable(rows, args.dtype));
    console.log(controlLines(reports));
    const step = stepLine(reports);
    if (step) console.log(step.line);
    const idleCpu = reports.map((r) => `${r.idleCpuMs.toFixed(1)} ms`).join(', ');
    console.log(`\n# idle job, CPU used per rank in 1 s with nothing pending (2 s after the last call): ${idleCpu}`);
    console.log(`# after: ${machine.after}`);
    if (args.json) {
      const idleCpuMs = reports.map((r) => r.idleCpuMs);
      const json = JSON.stringify(
        {
          ranks: args.ranks,
          dtype: args.dtype,
          backend: args.backend,
          machine,
          rows,
          idleCpuMs,
          ...(step && { step: step.rows }),
        },
        null,
        2,
      );
      if (args.json === '-') console.log(json);
      else writeFileSync(args.json, json);
    }
    if (args.plot) {
      writeFileSync(args.plot, benchPlot(rows, args));
      console.log(`# plot: ${args.plot}`);
    }
    if (args.timeline && timelineBase) {
      const events = mergeTimelines(timelineBase, args.ranks, args.timeline);
      console.log(`# timeline: ${events} events of ${args.ranks} ranks in ${args.timeline}`);
    }
    return rows.some((r) => r.ok === false) || step?.rows.some((r) => r.ok === false) ? 1 : 0;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

process.exitCode = await main();
