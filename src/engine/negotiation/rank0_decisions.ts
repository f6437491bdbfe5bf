/**
 * Rank 0's side of negotiation: it hands ranks' reports to the Coordinator, fuses the responses it
 * decides (fusion.ts), evicts cache ids whose names came back with other parameters, and
 * publishes each batch to every rank, itself included, with the number of ready rounds after
 * which it runs.
 *
 * Why that number puts a batch at the same place on every rank: if rank 0 has contributed to the
 * open round, a peer may close that round before the batch arrives but not the next one (rank
 * 0's contribution to it travels behind the batch on the same ordered link), so every rank runs
 * the batch between the same two rounds.
 */
import type { Logger } from '../../core/logger.js';
import { planFusion } from '../execution/fusion.js';
import type { SettingsChange } from '../tuning/tuned_settings.js';
import type { ControlMessage, Request, Response, WireResponse } from '../wire/messages.js';
import { Coordinator } from './coordinator.js';
import type { ResponseCache } from './response_cache.js';
import type { TensorQueue } from './tensor_queue.js';

/** A batch of rank 0's decisions, as every rank runs it (cache ids expanded). */
export interface Decision {
  afterRounds: number;
  evict: number[];
  responses: Response[];
  /** Autotune's change, applied before the responses (tuning/). */
  settings?: SettingsChange;
}

export interface Rank0Settings {
  size: number;
  stallTimeoutMs: number;
  stallWarningMs: number;
  fusionThresholdBytes: number;
}

export interface Rank0Hooks {
  /** Where the ready rounds stand on rank 0 (ready_path.ts). */
  rounds(): { closed: number; contributedToOpenRound: boolean };
  /** Sends a control message to every peer; settles once the OS has it on every link. */
  broadcast(message: ControlMessage): Promise<unknown>;
  /** Rank 0's own copy of a published batch. */
  decided(decision: Decision): void;
  /** Every rank asked to shut down. */
  allShutDown(): void;
}

export class Rank0Decisions {
  private readonly coordinator: Coordinator;
  private readonly undecided: { responses: Response[]; evict: number[]; settings?: SettingsChange } = {
    responses: [],
    evict: [],
  };
  /** Settles when the last published message has been handed to the OS on every link. */
  lastPublish: Promise<unknown> = Promise.resolve();
  /** Decision messages published so far (ready rounds by recursive doubling carry the count). */
  published = 0;

  constructor(
    private readonly settings: Rank0Settings,
    private readonly cache: ResponseCache,
    private readonly queue: TensorQueue,
    private readonly hooks: Rank0Hooks,
    logger: Logger,
  ) {
    this.coordinator = new Coordinator({
      size: settings.size,
      stallTimeoutMs: settings.stallTimeoutMs,
      stallWarningMs: settings.stallWarningMs,
      publish: (responses) => this.decide(responses),
      publishShutdown: () => {
        this.lastPublish = this.hooks.broadcast({ type: 'shutdown-ack' });
        this.hooks.allShutDown();
      },
      logger,
    });
  }

  /** Whether some rank has joined: every request comes in full then. */
  get joining(): boolean {
    return this.coordinator.joining;
  }

  /** The coordinator, for the ready path's reports of cached names some ranks hold. */
  get stalls(): Coordinator {
    return this.coordinator;
  }

  /** A report of new requests from `rank` (this one included). */
  onRequests(rank: number, requests: readonly Request[]): void {
    // A cached name asked for with other parameters: every rank drops it from its cache at one
    // agreed place, and ranks holding it ready send it here in full (set_engine.ts, runDecision).
    // (With the same parameters it comes in full while a rank has joined: no ready rounds then.)
    for (const request of requests) {
      const id = this.cache.idOfName(request.name);
      if (id !== undefined && !this.cache.holds(request) && !this.undecided.evict.includes(id)) this.undecided.evict.push(id);
    }
    this.coordinator.onRequests(rank, requests);
    this.publish();
  }

  /** Autotune's change (world only): published with the next batch, so every rank applies it at the batch's place. */
  publishSettings(change: SettingsChange): void {
    this.undecided.settings = change;
    this.publish();
  }

  /** The threshold that plans the fusion of what rank 0 decides from now on (autotune changes it). */
  set fusionThresholdBytes(bytes: number) {
    this.settings.fusionThresholdBytes = bytes;
  }

  onShutdown(rank: number): void {
    this.coordinator.onShutdown(rank);
  }

  close(): void {
    this.coordinator.close();
  }

  private decide(responses: Response[]): void {
    const elementsOf = (name: string) => this.queue.get(name)?.buffer?.length ?? 0;
    this.undecided.responses.push(...planFusion(responses, elementsOf, this.settings.fusionThresholdBytes));
    this.publish();
  }

  private publish(): void {
    const { responses, evict, settings } = this.undecided;
    if (responses.length === 0 && evict.length === 0 && !settings) return;
    this.undecided.responses = [];
    this.undecided.evict = [];
    delete this.undecided.settings;
    const rounds = this.hooks.rounds();
    const afterRounds = rounds.closed + (rounds.contributedToOpenRound ? 1 : 0);
    const wire: WireResponse[] = responses.map((r) => {
      const ids = this.cache.idsFor(r);
      return ids ? { kind: 'cached' as const, ids } : r;
    });
    this.published++;
    const change = settings && { settings };
    this.lastPublish = this.hooks.broadcast({ type: 'responses', afterRounds, evict, responses: wire, ...change });
    this.hooks.decided({ afterRounds, evict, responses, ...change });
  }
}
