/**
 * Adasum's result evaluated whole, in float64, as the definition states it: a binary tree of
 * pairs where, at level d, the vector of ranks [g, g + d) meets that of [g + d, g + 2d), and
 * each tensor (a run of `counts`; one run by default) combines with its own coefficients:
 * a' = (1 - a·b / 2|a|²) a + (1 - a·b / 2|b|²) b, a zero vector's coefficient being 1.
 */
export function adasumReference(inputs: readonly ArrayLike<number>[], counts?: readonly number[]): Float64Array {
  let vectors: Float64Array[] = inputs.map((v) => Float64Array.from(v));
  const runs = counts ?? [vectors[0]?.length ?? 0];
  while (vectors.length > 1) {
    const next: Float64Array[] = [];
    for (let g = 0; g < vectors.length; g += 2)
      next.push(adasumPair(vectors[g] as Float64Array, vectors[g + 1] as Float64Array, runs));
    vectors = next;
  }
  return vectors[0] as Float64Array;
}

function adasumPair(a: Float64Array, b: Float64Array, counts: readonly number[]): Float64Array {
  const out = new Float64Array(a.length);
  let start = 0;
  for (const count of counts) {
    let dot = 0;
    let aa = 0;
    let bb = 0;
    for (let i = start; i < start + count; i++) {
      dot += (a[i] as number) * (b[i] as number);
      aa += (a[i] as number) ** 2;
      bb += (b[i] as number) ** 2;
    }
    const ca = aa === 0 ? 1 : 1 - dot / (2 * aa);
    const cb = bb === 0 ? 1 : 1 - dot / (2 * bb);
    for (let i = start; i < start + count; i++) out[i] = ca * (a[i] as number) + cb * (b[i] as number);
    start += count;
  }
  return out;
}
