/**
 * model.fit callback for data that is not evenly split: at the end of every epoch, this rank
 * joins (ringreduce's `join`) and waits for the others to finish their epoch, then every rank
 * takes the weights and optimizer state of the rank that joined last.
 *
 * A rank whose data ran out first reaches its epoch end while the others still run steps. Its
 * join makes it a neutral contributor to the gradient allreduces they still make (the average
 * divides by the ranks that contributed), so they go on without it; it waits in its epoch-end
 * callback, which model.fit awaits, so it makes no other collective meanwhile. Once every rank
 * has joined, the last one to join has applied every update of the epoch, and the others missed
 * the ones made after they joined: its weights and optimizer state are broadcast to all, and
 * the ranks start the next epoch (and end training) identical.
 */
import * as tf from '@tensorflow/tfjs';
import { broadcastModel } from './broadcast_model.js';
import { type Collectives, collectivesOf, type ProcessSetOption, type RuntimeOption, type Scope, scopeOf } from './runtime.js';

/** Options of {@link JoinCallback}. */
export interface JoinCallbackOptions extends RuntimeOption, ProcessSetOption {
  /** Prefix of the broadcasts' names (default 'JoinCallback'). */
  name?: string;
}

/**
 * Put it before every callback that runs collectives at the end of an epoch
 * (MetricAverageCallback included): callbacks run in list order, and a rank must have joined
 * before it makes any other collective that the ranks still training would not reach.
 *
 * @example
 * const xsMine = shardTensor(xs, { dropRemainder: false }); // the first (n % size) ranks get one more sample
 * await model.fit(xsMine, ysMine, {
 *   callbacks: [new BroadcastGlobalVariablesCallback(), new JoinCallback(), new MetricAverageCallback()],
 * });
 */
export class JoinCallback extends tf.Callback {
  private last = -1;
  private readonly collectives: Collectives;
  private readonly options: JoinCallbackOptions;
  private where: Scope | undefined;

  /**
   * A callback to pass to `model.fit` on every rank of the job (or of the process set).
   * @param options the runtime, the process set whose ranks join (default: the whole job), the broadcasts' names
   * @throws InvalidArgumentError if `processSet` is not a ProcessSet holding this rank
   */
  constructor(options: JoinCallbackOptions = {}) {
    super();
    this.options = options;
    this.collectives = collectivesOf(options);
    if (options.processSet !== undefined) this.where = scopeOf(this.collectives, options.processSet);
  }

  /** The rank (of the process set, if any) that joined last at the latest epoch end; -1 before the first. */
  get lastJoined(): number {
    return this.last;
  }

  /**
   * Called by `model.fit` after each epoch: joins, waits until every rank has joined, then sets
   * the model's weights and optimizer state on every rank to those of the rank that joined last.
   */
  override async onEpochEnd(): Promise<void> {
    this.where ??= scopeOf(this.collectives, this.options.processSet);
    const scope = this.where.options;
    this.last = await this.collectives.join(scope);
    await broadcastModel(this.model, {
      ...scope,
      runtime: this.options.runtime,
      root: this.last,
      name: `${this.options.name ?? 'JoinCallback'}.broadcast`,
    });
  }
}
