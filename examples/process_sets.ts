/**
 * Process sets: collectives among a subset of the ranks. The even and the odd ranks each
 * average their own values, at the same time, while the whole job still has its own collectives.
 *
 *   npm run build
 *   node bin/ringrun.js -np 3 node dist/examples/process_sets.js
 */
import * as rr from 'ringreduce';

await rr.init();
const ranks = Array.from({ length: rr.size() }, (_, r) => r);
// Adding a set is a collective of the whole job: every rank adds both, in the same order.
const evens = await rr.addProcessSet(ranks.filter((r) => r % 2 === 0));
const odds = await rr.addProcessSet(ranks.filter((r) => r % 2 === 1));
const mine = evens.includes(rr.rank()) ? evens : odds;

// Within a set, ranks and names are the set's own: set.rank() is 0 … set.size()-1.
const mean = await rr.allreduce(new Float64Array([rr.rank()]), { name: 'mean', op: 'average', processSet: mine });
console.log(`rank ${rr.rank()} is rank ${mine.rank()} of ${mine.ranks.join(',')}: their mean rank is ${mean[0]}`);

// The whole job (the default process set) still works alongside.
const all = await rr.allreduce(new Float64Array([rr.rank()]), { name: 'mean', op: 'average' });
if (rr.rank() === 0) console.log(`mean rank of the job: ${all[0]}`);
await rr.shutdown();
