/**
 * The examples gallery runs as examples/README.md says: each command of its table and its
 * per-node block runs through bash from the checkout (2 or 3 ranks, a few seconds each), and
 * prints what the example is about (hello_allreduce runs in the per-node block, and as hello.js
 * in package.test.ts's getting-started run). The MNIST demo and the deploy recipes have tests of their
 * own (tfjs_mnist_demo, browser_ranks, deploy_sbatch, deploy_manifests). Every example imports
 * the package by its name, never the repository's sources.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { freePort } from '../helpers/world.js';
import { cleanEnv } from './fixtures/ringrun_harness.js';

const kRoot = fileURLToPath(new URL('../../../', import.meta.url));
const kReadme = readFileSync(join(kRoot, 'examples/README.md'), 'utf8');

/** The "run it" command of the table row whose first cell links `file`. */
function commandOf(file: string): string {
  const row = kReadme
    .split('\n')
    .map((line) => line.split('|').map((cell) => cell.trim()))
    .find((cells) => cells[1] === `[${file}](${file})`);
  assert.ok(row, `examples/README.md has no row for ${file}`);
  const command = /^`([^`]+)`$/.exec(row[3] ?? '')?.[1];
  assert.ok(command, `the row of ${file} has no command`);
  return command;
}

async function run(script: string): Promise<string> {
  const child = spawn('bash', ['-e', '-c', script], { cwd: kRoot, env: cleanEnv({ NO_COLOR: '1' }) });
  let output = '';
  child.stdout.on('data', (chunk) => {
    output += chunk;
  });
  child.stderr.on('data', (chunk) => {
    output += chunk;
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  clearTimeout(timer);
  assert.equal(code, 0, `${script}\n${output}`);
  return output;
}

// Two at a time: a job of 2 or 3 ranks mostly waits on start-up, and CI has 2 cores.
describe('the examples gallery', { timeout: 60_000, concurrency: 2 }, () => {
  it('imports ringreduce by name (the MNIST demo too)', () => {
    const sources = readdirSync(join(kRoot, 'examples'), { recursive: true })
      .map(String)
      .filter((path) => path.endsWith('.ts'));
    assert.ok(sources.length >= 12, sources.join(', '));
    for (const path of sources) {
      const text = readFileSync(join(kRoot, 'examples', path), 'utf8');
      assert.doesNotMatch(text, /from '(\.\.\/)+src\//, `${path} imports the repository's sources`);
      // The demo's helpers (data, model, options) need no ringreduce; its program does.
      if (!path.startsWith('mnist') || path.endsWith('train.ts')) assert.match(text, /from 'ringreduce'/, path);
    }
  });

  it('hello_allreduce: the program docs/getting-started.md runs (as hello.js), and the per-node launch below', () => {
    const source = readFileSync(join(kRoot, 'examples/hello_allreduce.ts'), 'utf8').replace(/^\/\*\*[\s\S]*?\*\/\n/, '');
    const doc = readFileSync(join(kRoot, 'docs/getting-started.md'), 'utf8');
    assert.ok(
      doc.includes(`Save this as \`hello.js\`:\n\n\`\`\`js\n${source}\`\`\``),
      'hello_allreduce.ts differs from hello.js',
    );
    assert.match(commandOf('hello_allreduce.ts'), /^node bin\/ringrun\.js -np 2 node dist\/examples\/hello_allreduce\.js$/);
  });

  it('tfjs_training: every rank learns the same line', async () => {
    const out = await run(commandOf('tfjs_training.ts'));
    // The weights start at random and fit() shuffles: the last SGD step leaves the line within a
    // few hundredths of y = 3x - 1, the same on both ranks.
    const lines = [0, 1].map((rank) => {
      const match = new RegExp(`\\[${rank}\\] rank ${rank}: (y = (-?[\\d.]+)x ([-+]) ([\\d.]+)), loss ([\\d.]+)`).exec(out);
      assert.ok(match, out);
      const [, line, kernel, sign, bias, loss] = match as unknown as [string, string, string, string, string, string];
      assert.ok(Math.abs(Number(kernel) - 3) <= 0.05, out);
      assert.ok(Math.abs((sign === '-' ? -1 : 1) * Number(bias) + 1) <= 0.05, out);
      assert.ok(Number(loss) < 0.01, out);
      return line;
    });
    assert.equal(lines[0], lines[1], out);
  });

  it('process_sets: each set averages its own ranks, the job its own', async () => {
    const out = await run(commandOf('process_sets.ts'));
    assert.match(out, /\[2\] rank 2 is rank 1 of 0,2: their mean rank is 1\n/);
    assert.match(out, /\[1\] rank 1 is rank 0 of 1: their mean rank is 1\n/);
    assert.match(out, /\[0\] mean rank of the job: 1\n/);
  });

  it('pipeline: every batch passes every stage', async () => {
    const out = await run(commandOf('pipeline.ts'));
    assert.match(out, /\[2\] batch 0 after 3 stages: 3\n[\s\S]*\[2\] batch 3 after 3 stages: 6\n/);
  });

  it('elastic: a killed worker, the others go on from the last commit', async () => {
    const out = await run(commandOf('elastic/train.ts'));
    assert.match(out, /worker w1 \(rank 1 of generation 1\) was killed by SIGKILL; 2 left/);
    assert.match(out, /\[0\] recovered: \d+ ms from the kill/);
    assert.match(out, /\[0\] 8 steps, 2 ranks at the end/);
  });

  it('one launcher per node: two ringruns make one job', async () => {
    const block = /## One launcher per node[\s\S]*?```sh\n([\s\S]*?)```/.exec(kReadme)?.[1];
    assert.ok(block);
    const out = await run(block.replaceAll(':29400', `:${await freePort()}`));
    assert.match(out, /\[0\] rank 0 of 2: sum of ranks 1, ranks counted 2/);
    assert.match(out, /\[1\] rank 1 of 2: sum of ranks 1, ranks counted 2/);
    assert.doesNotMatch(out, /RINGREDUCE_SECRET is not set/);
  });
});
