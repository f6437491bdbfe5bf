/**
 * N engines in one thread over the memory transport, for tests that look inside the engine
 * (execution counts, control traffic): each rank's completions are collected per request id.
 */
import { type InitOptions, resolveConfig } from '../../src/core/config.js';
import { Logger } from '../../src/core/logger.js';
import type { TypedArray } from '../../src/core/types.js';
import { Engine } from '../../src/engine/engine.js';
import type { PeerRequest } from '../../src/engine/execution/point_to_point.js';
import type { AllreduceRequest } from '../../src/engine/ops/registry.js';
import type { FromEngine } from '../../src/engine/threads/worker_protocol.js';
import type { Request } from '../../src/engine/wire/messages.js';
import { openTimeline } from '../../src/observability/timeline.js';
import { createMemoryWorld, type MemoryTransport } from '../../src/transport/memory/memory_transport.js';
import { testEnv } from './test_env.js';

export interface TestRank {
  engine: Engine;
  transport: MemoryTransport;
  /** Control messages and bytes this rank has sent. */
  control: { messages: number; bytes: number };
  submit(request: Request | PeerRequest, buffer: TypedArray | undefined): Promise<FromEngine>;
}

export function startEngines(size: number, options: InitOptions = {}): TestRank[] {
  const world = createMemoryWorld(size, { delivery: 'macrotask' });
  let nextId = 1;
  return world.map((transport, rank) => {
    const config = resolveConfig({ rank, size, storeAddress: '127.0.0.1:1', logLevel: 'error', ...options }, testEnv());
    const waiting = new Map<number, (message: FromEngine) => void>();
    const control = { messages: 0, bytes: 0 };
    const sendControl = transport.sendControl.bind(transport);
    transport.sendControl = (peer, payload) => {
      control.messages++;
      control.bytes += payload.byteLength;
      return sendControl(peer, payload);
    };
    const post = (message: FromEngine) => {
      if ('id' in message) waiting.get(message.id)?.(message);
    };
    const engine = new Engine(config, transport, post, new Logger(`[rank ${rank}]`, 'error', () => {}), {
      timeline: openTimeline(config),
    });
    return {
      engine,
      transport,
      control,
      submit(request, buffer) {
        const id = nextId++;
        const done = new Promise<FromEngine>((resolve) => waiting.set(id, resolve));
        engine.enqueue({ id, request, buffer });
        return done;
      },
    };
  });
}

export async function stopEngines(ranks: readonly TestRank[]): Promise<void> {
  await Promise.all(ranks.map((r) => r.engine.shutdown()));
}

export function allreduceRequest(name: string, length: number): AllreduceRequest {
  return { name, op: 'allreduce', dtype: 'float32', shape: [length], reduceOp: 'sum' };
}
