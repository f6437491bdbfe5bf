/**
 * Checkpoints with plain @tensorflow/tfjs on Node. tfjs's `file://` handlers come with
 * @tensorflow/tfjs-node only; these write and read the same files (model.json next to
 * weights.bin, the layout `tf.loadLayersModel('file://…/model.json')` reads) with node:fs:
 *
 * - `fileSaveHandler(dir)`, an IOHandler built on `tf.io.withSaveHandler`, for `model.save()`;
 * - `fileLoadHandler(dir)`, an IOHandler for `tf.loadLayersModel()`;
 * - `saveModelToDir(model, dir)` and `loadModelFromDir(dir)`, which also keep the optimizer's
 *   state, and `checkpointInfo(dir)`, the epochs a checkpoint was saved after;
 * - `ModelCheckpointCallback`, which saves on one rank (0) every few epochs of `model.fit`.
 *
 * The recipe to resume a data-parallel job: load on rank 0, then broadcastModel (docs/tfjs.md).
 * node:fs is imported when a file is read or written, not with this module: a browser rank loads
 * the adapter too, and only saving to files is Node's.
 */
import * as tf from '@tensorflow/tfjs';
import { InvalidArgumentError } from '../../core/errors.js';
import * as rr from '../../index.js';

/** node:fs/promises and node:path, or an error saying that this rank has no file system. */
async function fileSystem() {
  try {
    const [fs, path] = await Promise.all([import('node:fs/promises'), import('node:path')]);
    return { ...fs, join: path.join };
  } catch (error) {
    throw new InvalidArgumentError(
      `checkpoints are files, and this rank has no file system (a browser rank): save and load them on a Node rank (${(error as Error).message})`,
    );
  }
}

export const kModelFile = 'model.json';
export const kWeightsFile = 'weights.bin';

/** What model.json holds besides tfjs's fields: the epochs trained when it was saved. */
interface CheckpointJSON extends tf.io.ModelJSON {
  ringreduce?: { epochs?: number };
}

/** Options of {@link saveModelToDir}. */
export interface SaveModelOptions {
  /** Save the optimizer's state (iteration count, moments) and training config too (default true). */
  includeOptimizer?: boolean;
  /** The epochs trained so far, kept in model.json; `checkpointInfo(dir).epochs` reads it back. */
  epochs?: number;
}

/**
 * An IOHandler that writes `model.json` and `weights.bin` into `dir` (made if missing). Each file
 * is written beside its final name and renamed into place, so that a process killed while saving
 * never leaves a half-written file behind.
 *
 * @example await model.save(rrtf.fileSaveHandler('./checkpoints/mnist'));
 */
export function fileSaveHandler(dir: string, options: { epochs?: number } = {}): tf.io.IOHandler {
  return tf.io.withSaveHandler(async (artifacts) => writeArtifacts(dir, artifacts, options.epochs));
}

/**
 * An IOHandler that reads `model.json` from `dir` and the weight files its manifest names
 * (`weights.bin` for the ones saved here; the shards tfjs-converter writes too).
 *
 * @example const model = await tf.loadLayersModel(rrtf.fileLoadHandler('./checkpoints/mnist'));
 */
export function fileLoadHandler(dir: string): tf.io.IOHandler {
  return {
    load: async () => {
      const modelJSON = await readModelJSON(dir);
      const { readFile, join } = await fileSystem();
      return tf.io.getModelArtifactsForJSON(modelJSON, async (manifest) => {
        const specs = manifest.flatMap((group) => group.weights);
        const files = await Promise.all(manifest.flatMap((group) => group.paths).map((path) => readFile(join(dir, path))));
        const data = new Uint8Array(files.reduce((n, file) => n + file.byteLength, 0));
        let offset = 0;
        for (const file of files) {
          data.set(file, offset);
          offset += file.byteLength;
        }
        return [specs, data.buffer];
      });
    },
  };
}

/**
 * Saves `model` into `dir` (model.json, weights.bin), with its optimizer's state unless
 * `includeOptimizer: false`. Call it on one rank: every rank holds the same weights.
 *
 * @example if (rr.rank() === 0) await rrtf.saveModelToDir(model, './checkpoints/mnist', { epochs: 5 });
 */
export async function saveModelToDir(
  model: tf.LayersModel,
  dir: string,
  options: SaveModelOptions = {},
): Promise<tf.io.SaveResult> {
  const optimizer = (options.includeOptimizer ?? true) ? (model as { optimizer?: tf.Optimizer }).optimizer : undefined;
  let extra: { trainingConfig: tf.io.TrainingConfig; specs: tf.io.WeightsManifestEntry[]; data: ArrayBuffer } | undefined;
  if (optimizer !== undefined) {
    // model.save({ includeOptimizer: true }) does the same but never disposes the iteration count's scalar.
    const named = await optimizer.getWeights();
    try {
      const { data, specs } = await tf.io.encodeWeights(named, 'optimizer');
      const trainingConfig = (model as unknown as { getTrainingConfig(): tf.io.TrainingConfig }).getTrainingConfig();
      extra = { trainingConfig, specs, data };
    } finally {
      tf.dispose(named.map((w) => w.tensor).filter((t) => !(t instanceof tf.Variable)));
    }
  }
  const handler = tf.io.withSaveHandler(async (artifacts) => {
    const all: tf.io.ModelArtifacts =
      extra === undefined
        ? artifacts
        : {
            ...artifacts,
            trainingConfig: extra.trainingConfig,
            weightSpecs: [...(artifacts.weightSpecs ?? []), ...extra.specs],
            weightData: tf.io.concatenateArrayBuffers([weightBytes(artifacts.weightData), extra.data]),
          };
    return writeArtifacts(dir, all, options.epochs);
  });
  return model.save(handler, { includeOptimizer: false });
}

/**
 * Loads the model saved in `dir` (by saveModelToDir, ModelCheckpointCallback or tfjs-node's
 * `file://` handler): its weights, and its optimizer's state when it was saved with it (the model
 * is then compiled with that optimizer, loss and metrics).
 *
 * @example
 * const model = rr.rank() === 0 ? await rrtf.loadModelFromDir(dir) : buildModel();
 */
export async function loadModelFromDir(dir: string, options?: tf.io.LoadOptions): Promise<tf.LayersModel> {
  return tf.loadLayersModel(fileLoadHandler(dir), options);
}

/**
 * Whether `dir` holds a checkpoint (a model.json), and how many epochs it was saved after when
 * that was recorded (ModelCheckpointCallback records it); undefined without a checkpoint.
 *
 * @example const resumeAt = (await rrtf.checkpointInfo(dir))?.epochs ?? 0;  // model.fit's initialEpoch
 */
export async function checkpointInfo(dir: string): Promise<{ epochs: number | undefined } | undefined> {
  let modelJSON: CheckpointJSON;
  try {
    modelJSON = await readModelJSON(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  return { epochs: modelJSON.ringreduce?.epochs };
}

/** Options of {@link ModelCheckpointCallback}: where and how often to save, and which rank saves. */
export interface ModelCheckpointOptions {
  /** Where to save: a directory, or a function of the epoch (0-based) that names one. */
  dir: string | ((epoch: number) => string);
  /** Save after every `everyEpochs` epochs (default 1). */
  everyEpochs?: number;
  /** Save the optimizer's state too (default true). */
  includeOptimizer?: boolean;
  /** The rank that saves (default 0). */
  root?: number;
  /** Where the rank comes from (default: the module's rr.rank()). */
  runtime?: Pick<rr.RingReduce, 'rank'>;
  /** Print a line per checkpoint (default false). */
  verbose?: boolean;
}

/**
 * model.fit callback: rank `root` (0) saves the model every `everyEpochs` epochs, with the
 * optimizer's state and the epochs trained so far; the other ranks do nothing (their weights are
 * the same). Put it after MetricAverageCallback and JoinCallback.
 *
 * @example
 * callbacks: [new rrtf.BroadcastGlobalVariablesCallback(), new rrtf.ModelCheckpointCallback({ dir: './ckpt', everyEpochs: 2 })]
 */
export class ModelCheckpointCallback extends tf.Callback {
  private readonly options: ModelCheckpointOptions;
  private readonly everyEpochs: number;
  /** Where the last checkpoint went, if this rank saved one. */
  lastSaved: string | undefined;

  /**
   * A callback to pass to `model.fit` on every rank (only `root` saves).
   * @param options where to save (`dir`, required), how often, with or without the optimizer's state, which rank saves
   * @throws InvalidArgumentError if `dir` is neither a path nor a function, or `everyEpochs` or `root` is not an integer (at least 1, at least 0)
   */
  constructor(options: ModelCheckpointOptions) {
    super();
    if (typeof options !== 'object' || options === null) {
      throw new InvalidArgumentError('ModelCheckpointCallback takes { dir, everyEpochs?, includeOptimizer?, root? }');
    }
    if (typeof options.dir !== 'string' && typeof options.dir !== 'function') {
      throw new InvalidArgumentError(
        `ModelCheckpointCallback: dir must be a path or a function of the epoch, got ${String(options.dir)}`,
      );
    }
    const every = options.everyEpochs ?? 1;
    if (!Number.isSafeInteger(every) || every < 1) {
      throw new InvalidArgumentError(`ModelCheckpointCallback: everyEpochs must be a positive integer, got ${String(every)}`);
    }
    const root = options.root ?? 0;
    if (!Number.isSafeInteger(root) || root < 0) {
      throw new InvalidArgumentError(`ModelCheckpointCallback: root must be a rank (an integer >= 0), got ${String(root)}`);
    }
    this.options = options;
    this.everyEpochs = every;
  }

  /**
   * Called by `model.fit` after each epoch: every `everyEpochs`-th epoch, rank `root` saves the
   * model into `dir` (as {@link saveModelToDir} does) and sets {@link lastSaved}.
   */
  override async onEpochEnd(epoch: number): Promise<void> {
    if ((epoch + 1) % this.everyEpochs !== 0) return;
    const rank = (this.options.runtime ?? rr).rank();
    if (rank !== (this.options.root ?? 0)) return;
    const dir = typeof this.options.dir === 'function' ? this.options.dir(epoch) : this.options.dir;
    const options: SaveModelOptions = { epochs: epoch + 1 };
    if (this.options.includeOptimizer !== undefined) options.includeOptimizer = this.options.includeOptimizer;
    await saveModelToDir(this.model, dir, options);
    this.lastSaved = dir;
    if (this.options.verbose) console.log(`checkpoint: epoch ${epoch + 1} saved to ${dir}`);
  }
}

function weightBytes(data: tf.io.WeightData | undefined): ArrayBuffer {
  if (data === undefined) return new ArrayBuffer(0);
  return tf.io.CompositeArrayBuffer.join(data);
}

async function readModelJSON(dir: string): Promise<CheckpointJSON> {
  const { readFile, join } = await fileSystem();
  const text = await readFile(join(dir, kModelFile), 'utf8');
  return JSON.parse(text) as CheckpointJSON;
}

/** model.json (tfjs's layout, with one weights file) and weights.bin, each renamed into place. */
async function writeArtifacts(
  dir: string,
  artifacts: tf.io.ModelArtifacts,
  epochs: number | undefined,
): Promise<tf.io.SaveResult> {
  if (artifacts.modelTopology instanceof ArrayBuffer) {
    throw new InvalidArgumentError('fileSaveHandler saves layers models; a binary (GraphDef) topology is not supported');
  }
  const { mkdir, rename, writeFile, join } = await fileSystem();
  await mkdir(dir, { recursive: true });
  const modelJSON: CheckpointJSON = {
    modelTopology: artifacts.modelTopology ?? {},
    format: artifacts.format ?? 'layers-model',
    generatedBy: artifacts.generatedBy ?? `TensorFlow.js tfjs-layers v${tf.version_layers}`,
    convertedBy: artifacts.convertedBy ?? null,
    weightsManifest: [{ paths: [kWeightsFile], weights: artifacts.weightSpecs ?? [] }],
  };
  if (artifacts.trainingConfig != null) modelJSON.trainingConfig = artifacts.trainingConfig;
  if (artifacts.signature != null) modelJSON.signature = artifacts.signature;
  if (artifacts.userDefinedMetadata != null) modelJSON.userDefinedMetadata = artifacts.userDefinedMetadata;
  if (artifacts.modelInitializer != null) modelJSON.modelInitializer = artifacts.modelInitializer;
  if (artifacts.initializerSignature != null) modelJSON.initializerSignature = artifacts.initializerSignature;
  if (epochs !== undefined) modelJSON.ringreduce = { epochs };
  const suffix = `.${process.pid}.tmp`;
  const weights = new Uint8Array(weightBytes(artifacts.weightData));
  await writeFile(join(dir, kWeightsFile + suffix), weights);
  await rename(join(dir, kWeightsFile + suffix), join(dir, kWeightsFile));
  await writeFile(join(dir, kModelFile + suffix), JSON.stringify(modelJSON));
  await rename(join(dir, kModelFile + suffix), join(dir, kModelFile));
  return {
    modelArtifactsInfo: {
      dateSaved: new Date(),
      modelTopologyType: 'JSON',
      modelTopologyBytes: JSON.stringify(modelJSON.modelTopology).length,
      weightSpecsBytes: JSON.stringify(modelJSON.weightsManifest).length,
      weightDataBytes: weights.byteLength,
    },
  };
}
