/**
 * What a rank allocates per call, and where: a job (by default of one rank: no peers, nothing but
 * the API's and the engine's own work; under ringrun, its ranks) runs a step of named float32
 * allreduces, warms it up
 * until V8 has optimized it, then samples its allocations with V8's heap profiler, counting the
 * objects that young- and old-generation collections freed too (the allocations of a steady
 * state are almost all short-lived). Prints bytes per step and per call, and the functions that
 * allocated most (with V8's inlining on, an inlined function's allocations count for its caller:
 * `node --no-turbo-inlining dist/bench/allocations.js` attributes them to their own functions).
 *
 *   node dist/bench/allocations.js [--tensors 100] [--bytes 4096] [--steps 1000] [--warmup 2000] [--top 20] [--grouped]
 *   node bin/ringrun.js -np 2 node dist/bench/allocations.js --tensors 1 --bytes 4 --steps 20000 --warmup 10000
 *
 * Rank 0 prints.
 * The engine runs on this thread (RINGREDUCE_ENGINE_THREAD=0), so the profile sees both sides.
 */
import { Session } from 'node:inspector/promises';
import { parseArgs } from 'node:util';

interface ProfileNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: ProfileNode[];
}

const { values } = parseArgs({
  options: {
    tensors: { type: 'string', default: '100' },
    bytes: { type: 'string', default: '4096' },
    steps: { type: 'string', default: '1000' },
    warmup: { type: 'string', default: '2000' },
    top: { type: 'string', default: '20' },
    grouped: { type: 'boolean', default: false },
  },
});
const tensors = Number(values.tensors);
const elements = Math.max(1, Math.floor(Number(values.bytes) / 4));
const steps = Number(values.steps);
const warmup = Number(values.warmup);
const top = Number(values.top);
for (const [name, value, least] of [
  ['tensors', tensors, 1],
  ['steps', steps, 1],
  ['warmup', warmup, 0],
  ['top', top, 0],
] as const) {
  if (!Number.isSafeInteger(value) || value < least) throw new Error(`--${name} must be an integer of at least ${least}`);
}

process.env.RINGREDUCE_ENGINE_THREAD = '0';
const { RingReduce } = await import('../src/api/runtime.js');
const { allocShared } = await import('../src/core/dtypes.js');
// The job of the environment (ringrun's), or one rank of its own.
const rr = await RingReduce.init();
const inputs = Array.from({ length: tensors }, () => new Float32Array(elements).fill(1));
const outs = Array.from({ length: tensors }, () => allocShared('float32', elements));
const names = Array.from({ length: tensors }, (_, i) => `grad/${i}`);
const grouped = values.grouped === true;
const step = grouped
  ? () => rr.groupedAllreduce(inputs, { name: 'grads', outs })
  : () => Promise.all(inputs.map((x, i) => rr.allreduce(x, { name: names[i], out: outs[i] })));
for (let i = 0; i < warmup; i++) await step();

const session = new Session();
session.connect();
await session.post('HeapProfiler.startSampling', {
  samplingInterval: 256,
  includeObjectsCollectedByMinorGC: true,
  includeObjectsCollectedByMajorGC: true,
});
for (let i = 0; i < steps; i++) await step();
const { profile } = (await session.post('HeapProfiler.stopSampling')) as unknown as { profile: { head: ProfileNode } };
session.disconnect();
const rank = rr.rank();
const size = rr.size();
await rr.shutdown();

// Builtins (Map.prototype.set, ...) have no script: they are named after their caller.
const bySite = new Map<string, number>();
let total = 0;
const visit = (node: ProfileNode, caller: string): void => {
  const { functionName, url, lineNumber } = node.callFrame;
  const here = `${functionName || '(anonymous)'} ${url.split('/').slice(-2).join('/')}:${lineNumber + 1}`;
  const site = url === '' && caller !== '' ? `${functionName || '(anonymous)'} < ${caller}` : here;
  if (node.selfSize > 0) {
    bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize);
    total += node.selfSize;
  }
  for (const child of node.children) visit(child, here);
};
visit(profile.head, '');
if (rank === 0) report();

function report(): void {
  console.log(
    `${tensors} named allreduces of ${elements * 4} B${grouped ? ' as one groupedAllreduce' : ''} per step, ${size} rank${size > 1 ? 's' : ''}: ${(total / steps / 1024).toFixed(1)} KB allocated per step, ${(total / steps / tensors).toFixed(0)} B per call`,
  );
  for (const [site, bytes] of [...bySite].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    console.log(`${(bytes / steps / tensors).toFixed(0).padStart(6)} B/call  ${site}`);
  }
}
