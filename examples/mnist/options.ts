/**
 * The demo's options, from the command line or the environment (flags win):
 *   --epochs N          MNIST_EPOCHS          epochs to train (default 8)
 *   --steps N           MNIST_STEPS           cap on batches per epoch, for quick runs (default: all)
 *   --batch-size N      MNIST_BATCH_SIZE      samples per batch on each rank (default 128)
 *   --backward-passes K MNIST_BACKWARD_PASSES batches per weight update (DistributedOptimizer's
 *                                             backwardPassesPerStep; default 1)
 *   --lr X              MNIST_LR              single-rank Adam learning rate, scaled by size × K (default 0.001)
 *   --warmup-epochs N   MNIST_WARMUP_EPOCHS   learning-rate warm-up (default 2)
 *   --backend B         MNIST_BACKEND         wasm (default) or cpu
 *   --browser-backend B MNIST_BROWSER_BACKEND the browser ranks' backend: wasm, cpu or webgl (default: --backend);
 *                                             ranks on different backends re-synchronise their weights each epoch
 *   --compression C     MNIST_COMPRESSION     none (default) or fp16: gradients sent as half precision
 *                                             (DistributedOptimizer's compression)
 *   --adasum            MNIST_ADASUM=1        combine the gradients by Adasum (DistributedOptimizer's op 'adasum';
 *                                             a power-of-two number of ranks) instead of averaging them; the
 *                                             learning rate then grows with K only, not with the size
 *   --min-accuracy X    MNIST_MIN_ACCURACY    fail below this test accuracy (default 0.9; 0 when --steps is set)
 *   --dashboard         MNIST_DASHBOARD=1     report batch metrics to ringrun's dashboard (ringrun --dashboard) and
 *                                             draw a progress bar on rank 0 (DashboardCallback)
 *   --elastic           MNIST_ELASTIC=1       elastic training (under ringrun --elastic): a custom loop under
 *                                             rr.elastic.run, the model and progress in a TfjsState (elastic.ts)
 *   --commit-every N    MNIST_COMMIT_EVERY    elastic: commit every N steps (default 4)
 *   --kill-worker W     MNIST_KILL_WORKER     elastic, a test hook: the worker named W (w0, w1, ...) SIGKILLs
 *   --kill-at-batch N   MNIST_KILL_AT_BATCH   itself when it reaches step N (counted over the whole run)
 */
import mri from 'mri';
import type { Compression } from 'ringreduce';
import type { BackendName } from './backend.js';

export interface TrainOptions {
  epochs: number;
  steps: number | undefined;
  batchSize: number;
  backwardPasses: number;
  lr: number;
  warmupEpochs: number;
  backend: BackendName;
  browserBackend: BackendName;
  compression: Compression;
  adasum: boolean;
  minAccuracy: number;
  dashboard: boolean;
  elastic: boolean;
  commitEvery: number;
  killWorker: string | undefined;
  killAtBatch: number | undefined;
}

const kFlags = {
  epochs: { env: 'MNIST_EPOCHS', fallback: '8' },
  steps: { env: 'MNIST_STEPS', fallback: undefined },
  'batch-size': { env: 'MNIST_BATCH_SIZE', fallback: '128' },
  'backward-passes': { env: 'MNIST_BACKWARD_PASSES', fallback: '1' },
  lr: { env: 'MNIST_LR', fallback: '0.001' },
  'warmup-epochs': { env: 'MNIST_WARMUP_EPOCHS', fallback: '2' },
  backend: { env: 'MNIST_BACKEND', fallback: 'wasm' },
  'browser-backend': { env: 'MNIST_BROWSER_BACKEND', fallback: undefined },
  compression: { env: 'MNIST_COMPRESSION', fallback: 'none' },
  'min-accuracy': { env: 'MNIST_MIN_ACCURACY', fallback: undefined },
  'commit-every': { env: 'MNIST_COMMIT_EVERY', fallback: '4' },
  'kill-worker': { env: 'MNIST_KILL_WORKER', fallback: undefined },
  'kill-at-batch': { env: 'MNIST_KILL_AT_BATCH', fallback: undefined },
} as const;
type Flag = keyof typeof kFlags;

/**
 * The options from `argv` (the program's own arguments: rr.programArgs(), the same on Node and
 * browser ranks) and `env` (a Node rank's process.env; a browser rank has none).
 */
export function parseOptions(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): TrainOptions {
  const booleans = ['dashboard', 'elastic', 'adasum'];
  const parsed = mri([...argv], { string: Object.keys(kFlags), boolean: booleans });
  const known = new Set([...Object.keys(kFlags), ...booleans, '_']);
  const unknown = Object.keys(parsed).find((key) => !known.has(key));
  if (unknown !== undefined) throw new Error(`unknown option --${unknown} (options.ts lists them)`);
  if (parsed._.length > 0) throw new Error(`unexpected argument ${parsed._[0]} (options.ts lists the options)`);
  const values = parsed as unknown as Partial<Record<Flag, string>> & {
    dashboard?: boolean;
    elastic?: boolean;
    adasum?: boolean;
  };
  const raw = (flag: Flag): string | undefined => values[flag] ?? env[kFlags[flag].env] ?? kFlags[flag].fallback;
  const number = (flag: Flag, check: (v: number) => boolean): number | undefined => {
    const text = raw(flag);
    if (text === undefined) return undefined;
    const value = Number(text);
    if (!check(value)) throw new Error(`--${flag} (or ${kFlags[flag].env}): invalid value ${JSON.stringify(text)}`);
    return value;
  };
  const positiveInt = (v: number) => Number.isSafeInteger(v) && v > 0;
  const backend = raw('backend');
  if (backend !== 'wasm' && backend !== 'cpu') throw new Error(`--backend must be wasm or cpu, got ${backend}`);
  const browserBackend = raw('browser-backend') ?? backend;
  if (browserBackend !== 'wasm' && browserBackend !== 'cpu' && browserBackend !== 'webgl') {
    throw new Error(`--browser-backend must be wasm, cpu or webgl, got ${browserBackend}`);
  }
  const compression = raw('compression');
  if (compression !== 'none' && compression !== 'fp16') throw new Error(`--compression must be none or fp16, got ${compression}`);
  const steps = number('steps', positiveInt);
  const adasum = values.adasum === true || env.MNIST_ADASUM === '1';
  const elastic = values.elastic === true || env.MNIST_ELASTIC === '1';
  if (adasum && elastic) throw new Error('--adasum does not go with --elastic: a changing size may leave the powers of two');
  return {
    epochs: number('epochs', positiveInt) as number,
    steps,
    batchSize: number('batch-size', positiveInt) as number,
    backwardPasses: number('backward-passes', positiveInt) as number,
    lr: number('lr', (v) => v > 0) as number,
    warmupEpochs: number('warmup-epochs', (v) => v >= 0) as number,
    backend,
    browserBackend,
    compression,
    adasum,
    minAccuracy: number('min-accuracy', (v) => v >= 0 && v <= 1) ?? (steps === undefined ? 0.9 : 0),
    dashboard: values.dashboard === true || env.MNIST_DASHBOARD === '1',
    elastic,
    commitEvery: number('commit-every', positiveInt) as number,
    killWorker: raw('kill-worker'),
    killAtBatch: number('kill-at-batch', (v) => Number.isSafeInteger(v) && v >= 0),
  };
}
