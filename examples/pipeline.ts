/**
 * A send/recv pipeline: rank 0 makes batches, every other rank adds its stage's work to each
 * batch and passes it on; the last rank prints the results. Point-to-point calls involve only
 * the two ranks they name, and a recv takes the send with the same tag from its peer, in order.
 *
 *   npm run build
 *   node bin/ringrun.js -np 3 node dist/examples/pipeline.js
 */
import * as rr from 'ringreduce';

const kBatches = 4;
const kWidth = 8;

await rr.init();
const first = rr.rank() === 0;
const last = rr.rank() === rr.size() - 1;
for (let batch = 0; batch < kBatches; batch++) {
  // Stage 0 makes the batch; the others receive it from the previous stage.
  const data = first ? new Float32Array(kWidth).fill(batch) : await rr.recv(new Float32Array(kWidth), { from: rr.rank() - 1 });
  for (let i = 0; i < data.length; i++) data[i] = (data[i] as number) + 1; // this stage's work
  if (last) console.log(`batch ${batch} after ${rr.size()} stages: ${data[0]}`);
  else await rr.send(data, { to: rr.rank() + 1 });
}
await rr.shutdown();
