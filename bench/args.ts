/**
 * The bench's command line (commander): `npm run bench -- [options]`. Parsing is pure so the
 * values can be checked in one place and named in errors.
 */
import { Command, InvalidArgumentError } from 'commander';
import { kDTypes } from '../src/core/dtypes.js';
import { type Compression, type DType, kCompressions } from '../src/core/types.js';
import { type BenchOp, kBenchOps, kCompressedOps, kDefaultBenchOps } from './spec.js';

export interface BenchArgs {
  /** Run in a process set of the first setRanks ranks; 0: the whole job. */
  setRanks: number;
  ops: BenchOp[];
  sizes: number[];
  ranks: number;
  dtype: DType;
  /** --compression: 'fp16' for allreduce, allgather and reducescatter of float32. */
  compression: Compression;
  iterations: number;
  /** Untimed iterations per size; undefined: from the size (spec.ts, autoWarmup). */
  warmup?: number;
  check: boolean;
  fresh: boolean;
  inPlace: boolean;
  sync: boolean;
  tensors: number;
  /** Also time the fused training step against one allreduce of its size (spec.ts: BenchSpec.step). */
  step: boolean;
  json: string | undefined;
  timeline: string | undefined;
  backend: 'tcp' | 'mpi' | 'auto';
  /** Draw busbw and time against size into this SVG file (plot.ts). */
  plot: string | undefined;
  /** With --plot: the peers' results to draw beside (a run-peers.sh or compare_peers.sh output folder). */
  peers: string | undefined;
  /** Run the ranks under `ringrun --dashboard` (what watching a job costs: docs/performance.md). */
  dashboard: boolean;
}

const kUnits: Record<string, number> = {
  '': 1,
  B: 1,
  K: 1024,
  KB: 1024,
  KIB: 1024,
  M: 1 << 20,
  MB: 1 << 20,
  MIB: 1 << 20,
  G: 1 << 30,
  GIB: 1 << 30,
};

/** "4", "16K", "256M", "1GiB" → bytes. */
export function parseBytes(text: string): number {
  const match = /^(\d+)\s*([a-zA-Z]*)$/.exec(text.trim());
  const unit = match ? kUnits[(match[2] as string).toUpperCase()] : undefined;
  if (!match || unit === undefined) throw new InvalidArgumentError(`not a size: ${JSON.stringify(text)} (e.g. 4, 16K, 256M)`);
  return Number(match[1]) * unit;
}

/** "4:256M" (every power of `factor` between) or "4,1K,1M" (a list). */
export function parseSizes(text: string, factor: number): number[] {
  if (text.includes(':')) {
    const [lo, hi] = text.split(':').map(parseBytes) as [number, number];
    if (lo < 1 || hi < lo) throw new InvalidArgumentError(`size range ${text} must be min:max with 1 <= min <= max`);
    const sizes: number[] = [];
    for (let s = lo; s <= hi; s *= factor) sizes.push(s);
    return sizes;
  }
  return text.split(',').map(parseBytes);
}

function positiveInt(name: string, min: number) {
  return (text: string): number => {
    const value = Number(text);
    if (!Number.isSafeInteger(value) || value < min) throw new InvalidArgumentError(`${name} must be an integer >= ${min}`);
    return value;
  };
}

/** "allreduce", "allreduce,reducescatter" (run in that order) or "all" (every op). */
export function parseOps(text: string): BenchOp[] {
  const ops = text === 'all' ? [...kBenchOps] : text.split(',').map((op) => op.trim());
  for (const op of ops) {
    if (!kBenchOps.includes(op as BenchOp)) throw new InvalidArgumentError(`unknown op ${op} (${kBenchOps.join(', ')} or all)`);
  }
  return ops as BenchOp[];
}

export function parseBenchArgs(argv: readonly string[]): BenchArgs {
  const program = new Command('bench')
    .description(
      'Times ringreduce collectives between real processes (started with ringrun) and prints an nccl-tests style table.',
    )
    .option('-o, --op <ops>', `${kBenchOps.join(', ')}, a comma list (run in its order), or all`, parseOps, [...kDefaultBenchOps])
    .option('-s, --sizes <sizes>', 'min:max (powers of --factor) or a list, e.g. 4:256M or 4,1K,1M', '4:256M')
    .option('-f, --factor <n>', 'step between sizes of a min:max range', positiveInt('factor', 2), 4)
    .option('-n, --ranks <n>', 'number of processes', positiveInt('ranks', 1), 2)
    .option('-d, --dtype <dtype>', `one of ${kDTypes.join(', ')}`, 'float32')
    .option(
      '--compression <c>',
      `${kCompressions.join(' or ')}: fp16 sends float32 tensors as halves (allreduce, allgather, reducescatter)`,
      'none',
    )
    .option('-i, --iters <n>', 'timed iterations per size (default: from the size, 3..1000)', positiveInt('iters', 1), 0)
    .option(
      '-w, --warmup <n>',
      'untimed iterations per size (default: from the size, up to 10,000 calls, until V8 has optimized the path)',
      positiveInt('warmup', 0),
    )
    .option('--no-check', 'skip checking the results')
    .option('--fresh', 'let every call allocate its output (the default API) instead of reusing one via the out option')
    .option(
      '--in-place',
      'allreduce, broadcast and reduce (root) in place: the tensor is its own out (no input copy, as in torch.distributed); reducescatter: out is its own rows of the tensor; other ops as without',
    )
    .option('--sync', 'call allreduceSync & co. (blocking) instead of the promise API')
    .option(
      '-t, --tensors <n>',
      'allreduce: submit <n> named tensors of each size together per iteration',
      positiveInt('tensors', 1),
      1,
    )
    .option(
      '--step',
      'also time a training step of 100 named float32 allreduces of 4 KiB (fused) against one 400 KiB allreduce; on when --op is not given',
    )
    .option('--no-step', 'skip the training step case')
    .option(
      '--set-ranks <k>',
      'run every collective in a process set of the first <k> ranks (the others only join the job), to measure what a set costs',
      positiveInt('set-ranks', 1),
      0,
    )
    .option('--json <file>', 'also write the results as JSON to <file> ("-" for stdout)')
    .option('--timeline <file>', 'write a Chrome trace / Perfetto JSON of every rank to <file>')
    .option('--backend <backend>', 'tcp, mpi or auto (RINGREDUCE_BACKEND)', 'tcp')
    .option('--plot <file.svg>', 'also draw bus bandwidth and time per call against size into <file.svg>')
    .option('--peers <dir>', "with --plot: draw the peers' figures too, from a run-peers.sh or compare_peers.sh output folder")
    .option('--dashboard', 'run the ranks under ringrun --dashboard, to measure what watching costs')
    .exitOverride();
  program.parse(argv, { from: 'user' });
  const o = program.opts();
  if (!kDTypes.includes(o.dtype)) throw new InvalidArgumentError(`--dtype must be one of ${kDTypes.join(', ')}`);
  if (!kCompressions.includes(o.compression))
    throw new InvalidArgumentError(`--compression must be one of ${kCompressions.join(', ')}`);
  if (o.compression === 'fp16') {
    if (o.dtype !== 'float32') throw new InvalidArgumentError(`--compression fp16 needs --dtype float32, got ${o.dtype}`);
    const others = (o.op as BenchOp[]).filter((op) => !kCompressedOps.includes(op));
    if (others.length > 0)
      throw new InvalidArgumentError(`--compression fp16 applies to ${kCompressedOps.join(', ')}, not ${others.join(', ')}`);
    if (o.inPlace) throw new InvalidArgumentError('--compression fp16 has no in-place form (the halves are a copy)');
  }
  if (o.fresh && o.inPlace) throw new InvalidArgumentError('--fresh and --in-place exclude each other');
  if (!['tcp', 'mpi', 'auto'].includes(o.backend)) throw new InvalidArgumentError('--backend must be tcp, mpi or auto');
  if (o.setRanks > o.ranks) throw new InvalidArgumentError(`--set-ranks ${o.setRanks} is more than --ranks ${o.ranks}`);
  if (o.peers !== undefined && o.plot === undefined) throw new InvalidArgumentError('--peers goes with --plot');
  return {
    ops: o.op,
    sizes: parseSizes(o.sizes, o.factor),
    ranks: o.ranks,
    dtype: o.dtype,
    compression: o.compression,
    iterations: o.iters,
    warmup: o.warmup,
    check: o.check,
    fresh: Boolean(o.fresh),
    inPlace: Boolean(o.inPlace),
    sync: Boolean(o.sync),
    tensors: o.tensors,
    step: o.step ?? program.getOptionValueSource('op') === 'default',
    setRanks: o.setRanks,
    json: o.json,
    timeline: o.timeline,
    backend: o.backend,
    plot: o.plot,
    peers: o.peers,
    dashboard: Boolean(o.dashboard),
  };
}
