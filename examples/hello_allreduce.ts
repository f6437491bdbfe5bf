/**
 * Hello, allreduce: every rank contributes its rank number, every rank gets the sum.
 *
 *   npm run build
 *   node bin/ringrun.js -np 2 node dist/examples/hello_allreduce.js
 */
import * as rr from 'ringreduce';

await rr.init();
const sum = await rr.allreduce(new Float32Array([rr.rank(), 1]));
console.log(`rank ${rr.rank()} of ${rr.size()}: sum of ranks ${sum[0]}, ranks counted ${sum[1]}`);
await rr.shutdown();
