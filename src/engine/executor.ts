/**
 * Turns an agreed response into a run of one algorithm over the transport. Every rank calls
 * `execute` for the same responses in the same order, so the tag (a counter of executed
 * collectives) is the same on every rank and keeps the messages of consecutive collectives
 * apart.
 */

import { broadcast } from '../algorithms/broadcast.js';
import { BufferPool } from '../algorithms/buffer_pool.js';
import { ringAllgather } from '../algorithms/ring_allgather.js';
import { ringAllreduce } from '../algorithms/ring_allreduce.js';
import { allocShared } from '../api/dtypes.js';
import type { TypedArray } from '../api/types.js';
import { type NativeCollectives, nativeCollectivesOf, type Transport } from '../transport/transport.js';
import type { ExecuteResponse } from './messages.js';
import type { Entry } from './tensor_queue.js';

export interface ExecutionResult {
  /** Allgather only: the output, allocated once the sizes of every rank are known. */
  output?: TypedArray;
  shape?: number[];
}

const kMaxTag = 0xffff_ffff;

export class Executor {
  private nextTag = 0;
  private readonly pool = new BufferPool();
  private readonly native: NativeCollectives | undefined;

  constructor(private readonly transport: Transport) {
    this.native = nativeCollectivesOf(transport);
  }

  async execute(response: ExecuteResponse, entry: Entry): Promise<ExecutionResult> {
    const tag = this.nextTag;
    this.nextTag = tag === kMaxTag ? 0 : tag + 1;
    const options = { pool: this.pool };
    const { buffer } = entry;
    switch (response.op) {
      case 'allreduce':
        if (!buffer) return {};
        if (this.native?.supports('allreduce', response.dtype, response.reduceOp)) {
          await this.native.allreduce(buffer, response.reduceOp);
        } else {
          await ringAllreduce(this.transport, buffer, response.reduceOp, tag, options);
        }
        return {};
      case 'broadcast':
        if (!buffer) return {};
        if (this.native?.supports('broadcast', response.dtype)) await this.native.broadcast(buffer, response.root);
        else await broadcast(this.transport, buffer, response.root, tag, options);
        return {};
      case 'allgather':
        return this.allgather(response, entry, tag, options);
      case 'barrier':
        // Negotiation itself is the barrier: the response exists only once every rank arrived.
        return {};
    }
  }

  private async allgather(
    response: ExecuteResponse,
    entry: Entry,
    tag: number,
    options: { pool: BufferPool },
  ): Promise<ExecutionResult> {
    const { shape } = entry.request;
    const rowSize = shape.slice(1).reduce((a, b) => a * b, 1);
    const counts = response.firstDims.map((rows) => rows * rowSize);
    const total = counts.reduce((a, b) => a + b, 0);
    const output = allocShared(response.dtype, total);
    let offset = 0;
    for (let r = 0; r < this.transport.rank; r++) offset += counts[r] ?? 0;
    if (entry.buffer) output.set(entry.buffer as never, offset);
    if (this.native?.supports('allgather', response.dtype)) await this.native.allgather(output, counts);
    else await ringAllgather(this.transport, output, counts, tag, options);
    const rows = response.firstDims.reduce((a, b) => a + b, 0);
    return { output, shape: [rows, ...shape.slice(1)] };
  }

  close(): void {
    this.pool.clear();
  }
}
