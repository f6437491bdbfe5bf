/**
 * Slurm's grammar and placement: its tasks-per-node and host-list forms, the node-level values of
 * a task, and where a job started by Slurm meets.
 */
import { type Env, envInt } from './env_values.js';
import { InvalidArgumentError } from './errors.js';

/** What Slurm says of a task's node: how many tasks it runs, its index, and how many nodes the step has. */
export interface SlurmNodePlacement {
  localSize: number | undefined;
  crossRank: number | undefined;
  crossSize: number | undefined;
}

/**
 * Slurm's node-level values. SLURM_NTASKS_PER_NODE is set only with --ntasks-per-node; the
 * tasks of each node are in SLURM_STEP_TASKS_PER_NODE (srun) or SLURM_TASKS_PER_NODE, as
 * "2(x3),1" (2 tasks on each of 3 nodes, then 1), indexed by SLURM_NODEID.
 */
export function slurmPlacement(env: Env): SlurmNodePlacement {
  const nodeId = envInt(env, 'SLURM_NODEID');
  const perNodeText = env.SLURM_STEP_TASKS_PER_NODE || env.SLURM_TASKS_PER_NODE;
  const perNode = perNodeText ? parseSlurmTasksPerNode(perNodeText) : undefined;
  const fromList = nodeId !== undefined ? perNode?.[nodeId] : undefined;
  return {
    localSize: envInt(env, 'SLURM_NTASKS_PER_NODE', 1) ?? fromList,
    crossRank: nodeId,
    crossSize: envInt(env, 'SLURM_STEP_NUM_NODES', 1) ?? envInt(env, 'SLURM_NNODES', 1) ?? perNode?.length,
  };
}

/** Slurm's tasks-per-node form, "2(x3),1", expanded: [2, 2, 2, 1]. */
export function parseSlurmTasksPerNode(text: string): number[] {
  const counts: number[] = [];
  for (const item of text.split(',')) {
    const match = /^\s*(\d+)(?:\(x(\d+)\))?\s*$/.exec(item);
    if (match === null) {
      throw new InvalidArgumentError(`Slurm tasks per node ${JSON.stringify(text)}: expected a form like "2(x3),1"`);
    }
    const repeat = Number(match[2] ?? 1);
    if (repeat > 1_000_000) throw new InvalidArgumentError(`Slurm tasks per node ${JSON.stringify(text)}: too many nodes`);
    for (let i = 0; i < repeat; i++) counts.push(Number(match[1]));
  }
  return counts;
}

/**
 * Slurm's compressed host list, expanded in order: "node[01-03,07],gpu[1-2]-ib" gives node01,
 * node02, node03, node07, gpu1-ib, gpu2-ib. Ranges keep their zero padding; several bracket
 * groups in one name multiply out. Throws InvalidArgumentError on a malformed list.
 */
export function expandSlurmHostlist(text: string): string[] {
  const hosts: string[] = [];
  for (const item of splitTopLevel(text)) {
    let names = [''];
    const pattern = /([^[]*)(?:\[([^\]]*)\])?/gy;
    let consumed = 0;
    for (let match = pattern.exec(item); match !== null && match[0] !== ''; match = pattern.exec(item)) {
      consumed = pattern.lastIndex;
      const prefix = match[1] ?? '';
      const choices = match[2] === undefined ? [''] : expandRanges(match[2], text);
      names = names.flatMap((name) => choices.map((choice) => `${name}${prefix}${choice}`));
      if (names.length > 1_000_000) throw new InvalidArgumentError(`Slurm host list ${JSON.stringify(text)} is too long`);
    }
    if (consumed !== item.length) throw new InvalidArgumentError(`Slurm host list ${JSON.stringify(text)} is malformed`);
    hosts.push(...names.filter((name) => name !== ''));
  }
  return hosts;
}

/** Splits on the commas outside brackets. */
function splitTopLevel(text: string): string[] {
  const items: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '[') depth++;
    else if (c === ']') depth--;
    else if (c === ',' && depth === 0) {
      items.push(text.slice(start, i));
      start = i + 1;
    }
    if (depth < 0 || depth > 1) throw new InvalidArgumentError(`Slurm host list ${JSON.stringify(text)} is malformed`);
  }
  if (depth !== 0) throw new InvalidArgumentError(`Slurm host list ${JSON.stringify(text)} has an unclosed bracket`);
  items.push(text.slice(start));
  return items.map((item) => item.trim()).filter((item) => item !== '');
}

/** "01-03,07" → 01, 02, 03, 07 (the padding of the range's start is kept). */
function expandRanges(ranges: string, text: string): string[] {
  return ranges.split(',').flatMap((range) => {
    const match = /^(\d+)(?:-(\d+))?$/.exec(range.trim());
    if (match === null) throw new InvalidArgumentError(`Slurm host list ${JSON.stringify(text)}: bad range "${range}"`);
    const [, lowText = '', highText] = match;
    const low = Number(lowText);
    const high = highText === undefined ? low : Number(highText);
    if (high < low || high - low > 1_000_000) {
      throw new InvalidArgumentError(`Slurm host list ${JSON.stringify(text)}: bad range "${range}"`);
    }
    return Array.from({ length: high - low + 1 }, (_, i) => String(low + i).padStart(lowText.length, '0'));
  });
}

/** Below Linux's ephemeral ports (32768+), as ringrun's own choice for a remote store. */
const kSlurmPortRange = [20_000, 32_000] as const;

/**
 * Where a job started by Slurm meets: the first node of the step (SLURM_STEP_NODELIST, else
 * SLURM_JOB_NODELIST or SLURM_NODELIST), where task 0 runs, and a port derived from the job
 * and step ids (two jobs, or two steps running at once, sharing a node get different ports);
 * MASTER_PORT wins when set. Undefined outside Slurm. Also the default endpoint of
 * `ringrun --slurm`.
 */
export function slurmRendezvous(env: Env): { host: string; port: number } | undefined {
  const list = env.SLURM_STEP_NODELIST || env.SLURM_JOB_NODELIST || env.SLURM_NODELIST;
  if (!list) return undefined;
  const host = expandSlurmHostlist(list)[0];
  if (host === undefined) return undefined;
  const given = envInt(env, 'MASTER_PORT', 1);
  if (given !== undefined) return { host, port: given };
  const job = envInt(env, 'SLURM_JOB_ID') ?? envInt(env, 'SLURM_JOBID') ?? 0;
  const step = envInt(env, 'SLURM_STEP_ID') ?? envInt(env, 'SLURM_STEPID') ?? 0;
  const [low, high] = kSlurmPortRange;
  // A step id may be 0xfffffffe (the batch step): keep the arithmetic in safe integers.
  return { host, port: low + ((job * 31 + (step % 1000)) % (high - low)) };
}
