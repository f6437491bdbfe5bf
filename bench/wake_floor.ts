/**
 * Two ways to wake the other thread, side by side: a round trip between this thread and a worker
 * by postMessage, and by Atomics.notify with Atomics.waitAsync on a shared counter (what a
 * shared-memory submission ring would use instead of messages; engine/threads/hand_off.ts). Each mode
 * runs twice, alternating, in one process.
 *
 *   node dist/bench/wake_floor.js [round trips=5000]
 *
 * Prints each run's p50 and mean round trip in µs.
 */
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';

type Mode = 'postMessage' | 'waitAsync';

interface WakeData {
  shared: SharedArrayBuffer;
  mode: Mode;
}

/** Atomics.waitAsync (ES2024; Node 16+), typed here because the project's lib is ES2022. */
type WaitAsync = (
  array: Int32Array,
  index: number,
  value: number,
) => { async: false; value: string } | { async: true; value: Promise<string> };
const waitAsync = (Atomics as unknown as { waitAsync: WaitAsync }).waitAsync;

/** Counter words: the caller's requests, the worker's answers. */
const kAsked = 0;
const kAnswered = 1;

async function roundTrips(mode: Mode, count: number): Promise<Float64Array> {
  const shared = new SharedArrayBuffer(8);
  const words = new Int32Array(shared);
  const worker = new Worker(new URL(import.meta.url), { workerData: { shared, mode } satisfies WakeData });
  await new Promise((resolve) => worker.once('message', resolve));
  const times = new Float64Array(count);
  for (let i = 0; i < count; i++) {
    const start = performance.now();
    if (mode === 'postMessage') {
      const answered = new Promise((resolve) => worker.once('message', resolve));
      worker.postMessage(i);
      await answered;
    } else {
      const seen = Atomics.load(words, kAnswered);
      Atomics.add(words, kAsked, 1);
      Atomics.notify(words, kAsked);
      while (Atomics.load(words, kAnswered) === seen) {
        const wait = waitAsync(words, kAnswered, seen);
        if (wait.async) await wait.value;
      }
    }
    times[i] = (performance.now() - start) * 1000;
  }
  await worker.terminate();
  return times.sort();
}

function answer({ shared, mode }: WakeData): void {
  const port = parentPort;
  if (!port) return;
  // The port's listener keeps this thread alive: a pending waitAsync does not.
  port.on('message', (message) => {
    if (mode === 'postMessage') port.postMessage(message);
  });
  if (mode === 'waitAsync') {
    const words = new Int32Array(shared);
    let seen = Atomics.load(words, kAsked);
    const loop = async () => {
      for (;;) {
        const wait = waitAsync(words, kAsked, seen);
        if (wait.async) await wait.value;
        seen = Atomics.load(words, kAsked);
        Atomics.add(words, kAnswered, 1);
        Atomics.notify(words, kAnswered);
      }
    };
    void loop();
  }
  port.postMessage('ready');
}

if (isMainThread) {
  const count = Number(process.argv[2] ?? 5000);
  for (const mode of ['postMessage', 'waitAsync', 'postMessage', 'waitAsync'] as const) {
    const times = await roundTrips(mode, count);
    const mean = times.reduce((sum, t) => sum + t, 0) / count;
    console.log(`${mode}: ${count} round trips, p50 ${times[count >> 1]?.toFixed(0)} µs, mean ${mean.toFixed(0)} µs`);
  }
} else {
  answer(workerData as WakeData);
}
