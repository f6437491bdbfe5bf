/**
 * The user docs run from a clone and state what is: every file a doc command names is in the
 * repository (nothing outside it, such as ../shared/bench), and the performance docs carry no
 * work log (dated session headings, the goals of an issue, "before this session"); docs/env.md
 * lists every option init() accepts and ranks each launcher once; every module function users
 * call has its JSDoc.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { kInitOptionNames } from '../../src/core/config.js';

const kRoot = fileURLToPath(new URL('../../../', import.meta.url));
const kDocs = [
  'README.md',
  ...readdirSync(join(kRoot, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
  'bench/peers/README.md',
  'examples/deploy/README.md',
];

describe('the docs', () => {
  it('name no file outside the repository', () => {
    for (const doc of kDocs) {
      const text = readFileSync(join(kRoot, doc), 'utf8');
      assert.doesNotMatch(text, /\.\.\/shared\//, `${doc} points outside the repository`);
    }
    const script = readFileSync(join(kRoot, 'bench/compare_peers.sh'), 'utf8');
    assert.doesNotMatch(script, /\.\.\/shared/, 'bench/compare_peers.sh');
  });

  it('name only files that exist: bench/, bench/peers/, scripts/, examples/ and dist/bench/*.js', () => {
    for (const doc of kDocs) {
      const text = readFileSync(join(kRoot, doc), 'utf8');
      for (const [path] of text.matchAll(/\b(?:bench|scripts|examples)\/[\w./-]+\.(?:sh|ts|mjs|c|py|md|yaml|sbatch)\b/g)) {
        assert.ok(existsSync(join(kRoot, path)), `${doc} names ${path}, which does not exist`);
      }
      for (const [, name] of text.matchAll(/\bdist\/bench\/([\w-]+)\.js\b/g)) {
        assert.ok(existsSync(join(kRoot, 'bench', `${name}.ts`)), `${doc} runs dist/bench/${name}.js, whose source is missing`);
      }
    }
  });

  it('state what is: no session headings, issue goals or before/after a session in the performance docs', () => {
    for (const doc of ['docs/performance.md', 'docs/mpi.md', 'README.md']) {
      const text = readFileSync(join(kRoot, doc), 'utf8');
      assert.doesNotMatch(text, /^#+ .*(Session|session|\b20\d\d-\d\d-\d\d\b)/m, `${doc}: a dated or session heading`);
      assert.doesNotMatch(
        text,
        /\b[Ii]ssue \d|the issue|goals? of|the goal|this session|[Bb]efore this/,
        `${doc}: work-log text`,
      );
    }
  });

  it('run every mpirun with --bind-to none (Open MPI would pin the three busy threads of a rank to one core)', () => {
    for (const doc of kDocs) {
      const text = readFileSync(join(kRoot, doc), 'utf8');
      for (const [command] of text.matchAll(/\bmpirun\b[^`\n]*\s-np\b[^`\n]*/g)) {
        assert.match(command, /--bind-to none/, `${doc}: ${command}`);
      }
    }
  });

  it("docs/env.md lists every init() option, and each launcher's precedence once", () => {
    const env = readFileSync(join(kRoot, 'docs/env.md'), 'utf8');
    const options = env.slice(env.indexOf('### Options of `init()`'), env.indexOf('## ringrun'));
    for (const name of kInitOptionNames) assert.match(options, new RegExp(`\`${name}\``), `init option '${name}'`);
    const table = env.slice(env.indexOf('| Precedence |'), env.indexOf('`RINGREDUCE_STORE_ADDR` always wins'));
    const ranks = [...table.matchAll(/^\| (\d+) \|/gm)].map((m) => Number(m[1]));
    assert.deepEqual(ranks, [1, 2, 3, 4, 5]);
  });

  it('every module function users call (rr.allreduce, ...) has a JSDoc', () => {
    const source = readFileSync(join(kRoot, 'src/api/default_runtime.ts'), 'utf8');
    const exported = [...source.matchAll(/^export (?:const|async function|function) (\w+)/gm)];
    assert.ok(exported.length > 40, `${exported.length} exports`);
    for (const match of exported) {
      const before = source.slice(0, match.index).trimEnd();
      assert.ok(before.endsWith('*/'), `${match[1]} has no JSDoc`);
    }
  });
});
