/**
 * The package as a user gets it: `npm pack` of this checkout, once, unpacked into a scratch
 * project under dist/pack/ (whose dependencies then resolve from the checkout's node_modules,
 * where npm would have installed them: no registry). Checked there:
 * - every source map in the tarball resolves (its sources are shipped, or embedded), and the
 *   tarball holds CHANGELOG.md and the addon's sources but no build output;
 * - `ringreduce/package.json` is exported, and `InitOptions` documents each option in the .d.ts;
 * - the .d.ts files type-check with `skipLibCheck: false` and no @types/node (those of
 *   ringreduce/tfjs name no Node type), a misspelt option is an error naming `InitOptions`, and
 *   a result is typed SharedArrayBuffer-backed (result_types.test.ts checks each call and class);
 *   the README's "Using it" and process-set blocks compile against them as pasted;
 * - docs/getting-started.md runs as pasted: each ```sh block through bash, in order, from an empty
 *   directory; files from the blocks introduced by "Save this as `NAME`"; printed lines compared
 *   with the ```text block after them. Shims stand in where a command would reach the network or
 *   rebuild this checkout: `git clone` (an empty directory), `npm install` and `npm pack` in the
 *   clone (this tarball), `npm install <tarball>` (unpacks it), `npm install -D` (the checkout's
 *   TypeScript), `npx` (runs the installed binary). The block that builds the MPI addon is left
 *   out (test/unit/build_native.test.ts covers the build), and so is the one that denies two
 *   dependencies' install scripts (the shimmed install leaves no dependency to name).
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, posix } from 'node:path';
import { before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { kInitOptionNames } from '../../src/core/config.js';

const kRoot = fileURLToPath(new URL('../../../', import.meta.url));
const kWork = join(kRoot, 'dist', 'pack');
const kPackage = JSON.parse(readFileSync(join(kRoot, 'package.json'), 'utf8')) as { version: string };

/** The environment of a user's shell: no job variables (a test runner's or a launcher's). */
function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(
      ([name]) => !/^(RINGREDUCE_|OMPI_|PMI|SLURM_|NODE_TEST|npm_)/.test(name) && !['RANK', 'WORLD_SIZE'].includes(name),
    ),
  );
  return { ...env, NO_COLOR: '1', ...extra };
}

/** A child process, awaited (tests of this file run two at a time: nothing here blocks). */
function runAsync(
  command: string,
  args: string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv },
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => {
    stdout += chunk;
  });
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  return new Promise((resolve) => child.on('close', (status) => resolve({ status, stdout, stderr })));
}

let tarball = '';
let files: string[] = [];

/** Unpacks the tarball as `npm install <tarball>` would into `project`, bin link included. */
function installTarball(project: string): void {
  const target = join(project, 'node_modules', 'ringreduce');
  mkdirSync(target, { recursive: true });
  execFileSync('tar', ['xzf', tarball, '-C', target, '--strip-components=1']);
  mkdirSync(join(project, 'node_modules', '.bin'), { recursive: true });
  symlinkSync('../ringreduce/bin/ringrun.js', join(project, 'node_modules', '.bin', 'ringrun'));
}

before(() => {
  rmSync(kWork, { recursive: true, force: true });
  mkdirSync(kWork, { recursive: true });
  // --ignore-scripts: `prepare` would rebuild the checkout, which `npm test` has just built.
  const out = execFileSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', kWork], {
    cwd: kRoot,
    encoding: 'utf8',
    env: userEnv(),
  });
  const [packed] = JSON.parse(out) as { filename: string; files: { path: string }[] }[];
  assert.ok(packed);
  tarball = join(kWork, packed.filename);
  files = packed.files.map((f) => f.path);
});

// Two at a time: the compile and the getting-started run each keep one core busy.
describe('the packed package', { concurrency: 2 }, () => {
  it("resolves every source map's sources inside the package (or embeds them)", () => {
    const shipped = new Set(files);
    const maps = files.filter((path) => path.endsWith('.map'));
    assert.ok(maps.length > 100, `${maps.length} maps`);
    const unpacked = join(kWork, 'unpacked');
    mkdirSync(unpacked);
    execFileSync('tar', ['xzf', tarball, '-C', unpacked, '--strip-components=1']);
    for (const map of maps) {
      const { sources, sourcesContent } = JSON.parse(readFileSync(join(unpacked, map), 'utf8')) as {
        sources: string[];
        sourcesContent?: (string | null)[];
      };
      sources.forEach((source, i) => {
        if (typeof sourcesContent?.[i] === 'string') return;
        const path = posix.normalize(posix.join(posix.dirname(map), source));
        assert.ok(shipped.has(path), `${map} names ${source}, which the package does not ship`);
      });
    }
  });

  it('ships CHANGELOG.md, the gallery and the addon sources, and no build output', () => {
    for (const path of ['CHANGELOG.md', 'README.md', 'examples/README.md', 'examples/hello_allreduce.ts', 'native/binding.gyp']) {
      assert.ok(files.includes(path), `${path} is missing`);
    }
    const stray = files.filter((path) => /^native\/build\/|\.mk$|Makefile$|^dist\/(test|bench)\//.test(path));
    assert.deepEqual(stray, []);
  });

  it('exports ./package.json, and InitOptions documents each option in its .d.ts', () => {
    const project = join(kWork, 'exports');
    mkdirSync(project);
    writeFileSync(join(project, 'package.json'), '{ "type": "module" }\n');
    installTarball(project);
    const version = execFileSync(
      process.execPath,
      ['--input-type=module', '-e', "import p from 'ringreduce/package.json' with { type: 'json' }; console.log(p.version)"],
      { cwd: project, encoding: 'utf8' },
    );
    assert.equal(version.trim(), kPackage.version);

    const path = join(project, 'node_modules/ringreduce/dist/src/core/config.d.ts');
    const source = ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.ES2022, true);
    const options = source.statements.find(
      (s): s is ts.InterfaceDeclaration => ts.isInterfaceDeclaration(s) && s.name.text === 'InitOptions',
    );
    assert.ok(options, 'InitOptions is declared as an interface');
    const documented = options.members
      .map((m) => [(m.name as ts.Identifier).text, ts.getJSDocCommentsAndTags(m).length > 0])
      .sort();
    assert.deepEqual(documented, kInitOptionNames.map((name) => [name, true]).sort());
  });

  it('type-checks with skipLibCheck: false and no @types/node; a misspelt option names InitOptions', async () => {
    const project = join(kWork, 'types');
    mkdirSync(project);
    writeFileSync(join(project, 'package.json'), '{ "type": "module" }\n');
    installTarball(project);
    // skipDefaultLibCheck: TypeScript's own lib files are not ours to check (and take seconds).
    const compilerOptions = {
      target: 'ES2022',
      module: 'NodeNext',
      strict: true,
      noEmit: true,
      skipLibCheck: false,
      skipDefaultLibCheck: true,
      types: [],
    };
    // The README's code blocks, which users paste, compile against the package (no undefined name).
    const readme = readFileSync(join(kRoot, 'README.md'), 'utf8');
    const using = /## Using it\n\n```ts\n([^`]*)```/.exec(readme)?.[1];
    const sets = /### Process sets, grouped collectives and join\n\n```ts\n([^`]*)```/.exec(readme)?.[1];
    assert.ok(using && sets, 'the README blocks');
    writeFileSync(join(project, 'readme_using.ts'), `${using}export {};\n`);
    writeFileSync(join(project, 'readme_sets.ts'), `import * as rr from 'ringreduce';\n${sets}`);
    const files = ['consumer.ts', 'typo.ts', 'readme_using.ts', 'readme_sets.ts'];
    writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({ compilerOptions, files }));
    writeFileSync(
      join(project, 'consumer.ts'),
      [
        "import * as rr from 'ringreduce';",
        "import pkg from 'ringreduce/package.json' with { type: 'json' };",
        'export const version: string = pkg.version;',
        "export const options: rr.InitOptions = { size: 1, logLevel: 'info', processSets: [[0]] };",
        "export const sum: Promise<Float32Array> = rr.allreduce(new Float32Array(4), { name: 'g', op: 'average' });",
        // Results are typed as the SharedArrayBuffer-backed arrays they are.
        'export const shared: Promise<Float32Array<SharedArrayBuffer>> = rr.allreduce(new Float32Array(4));',
        '// @ts-expect-error a result is not ArrayBuffer-backed',
        'export const plain: Promise<Float32Array<ArrayBuffer>> = rr.allreduce(new Float32Array(4));',
        '',
      ].join('\n'),
    );
    writeFileSync(
      join(project, 'typo.ts'),
      "import type { InitOptions } from 'ringreduce';\nexport const o: InitOptions = { startTimeoutMS: 1 };\n",
    );
    const tsc = await runAsync(process.execPath, [join(kRoot, 'node_modules/typescript/bin/tsc'), '-p', '.'], { cwd: project });
    const errors = tsc.stdout.split('\n').filter((line) => /^\S[^(]*\(\d+,\d+\): error/.test(line));
    assert.equal(errors.length, 1, tsc.stdout);
    assert.match(errors[0] as string, /^typo\.ts.*'startTimeoutMS' does not exist in type 'InitOptions'/);
    // ringreduce/tfjs is left out of the compile (TensorFlow.js's own .d.ts are not clean under
    // skipLibCheck: false, and take seconds): its declarations name no Node-only type either.
    const tfjs = join(project, 'node_modules/ringreduce/dist/src/adapters/tfjs');
    for (const file of readdirSync(tfjs).filter((name) => name.endsWith('.d.ts'))) {
      assert.doesNotMatch(readFileSync(join(tfjs, file), 'utf8'), /\bNodeJS\.|from 'node:|import\('node:/, file);
    }
  });

  it('docs/getting-started.md runs as pasted in a fresh project', async () => {
    const shims = join(kWork, 'shims');
    writeShims(shims);
    let cwd = join(kWork, 'getting-started');
    mkdirSync(cwd);
    const doc = blocks(readFileSync(join(kRoot, 'docs/getting-started.md'), 'utf8'));
    let lastOutput: string | undefined;
    let ran = 0;
    for (const { lang, code, intro } of doc) {
      const file = /Save this as `([\w.-]+)`|this as `([\w.-]+)`:$/.exec(intro);
      if (file) {
        writeFileSync(join(cwd, (file[1] ?? file[2]) as string), code);
      } else if (lang === 'sh') {
        // approve builds the MPI addon (see above); deny needs the dependencies npm installs, which the shim does not.
        if (code.includes('install-scripts approve') || code.includes('install-scripts deny')) continue;
        const cwdFile = join(kWork, 'cwd');
        const run = await runAsync('bash', ['-e', '-c', `${code}\npwd > "${cwdFile}"`], {
          cwd,
          env: userEnv({ PATH: `${shims}:${process.env.PATH}` }),
        });
        assert.equal(run.status, 0, `${code}\n${run.stdout}${run.stderr}`);
        cwd = readFileSync(cwdFile, 'utf8').trim();
        lastOutput = run.stdout;
        ran++;
      } else if (lang === 'text') {
        assert.ok(lastOutput !== undefined, `output before any command: ${code}`);
        const lines = (text: string) => text.trim().split('\n').sort();
        assert.deepEqual(lines(lastOutput), lines(code));
        lastOutput = undefined;
      } else {
        assert.fail(`a ${lang || 'plain'} block that is neither a file nor a command, after: ${intro}`);
      }
    }
    assert.ok(ran >= 6, `${ran} command blocks ran`);
    assert.ok(existsSync(join(dirname(cwd), 'hello-ringreduce', 'build', 'average.js')));
  });
});

/** The code blocks of a Markdown file, with the last non-empty line before each. */
function blocks(markdown: string): { lang: string; code: string; intro: string }[] {
  const found: { lang: string; code: string; intro: string }[] = [];
  for (const match of markdown.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)) {
    const intro = markdown.slice(0, match.index).trimEnd().split('\n').at(-1) ?? '';
    found.push({ lang: match[1] as string, code: match[2] as string, intro });
  }
  return found;
}

/** Shell scripts standing in for git, npm and npx where the docs' commands need the network. */
function writeShims(dir: string): void {
  const realNpm = execFileSync('bash', ['-c', 'command -v npm'], { encoding: 'utf8' }).trim();
  const shims = {
    git: '[ "$1" = clone ] && mkdir -p "$(basename "$2" .git)"',
    npx: `PATH="$PWD/node_modules/.bin:${join(kRoot, 'node_modules/.bin')}:$PATH" exec "$@"`,
    npm: [
      'case "$*" in',
      '  install) exit 0 ;;',
      `  pack) cp "${tarball}" . && basename "${tarball}" ;;`,
      '  "install -D "*) exit 0 ;;',
      `  "install "*.tgz) "$(dirname "$0")/install-tarball" "$2" ;;`,
      `  *) exec "${realNpm}" "$@" ;;`,
      'esac',
    ].join('\n'),
    'install-tarball': [
      'mkdir -p node_modules/ringreduce node_modules/.bin',
      'tar xzf "$1" -C node_modules/ringreduce --strip-components=1',
      'ln -s ../ringreduce/bin/ringrun.js node_modules/.bin/ringrun',
    ].join('\n'),
  };
  mkdirSync(dir, { recursive: true });
  for (const [name, body] of Object.entries(shims)) {
    writeFileSync(join(dir, name), `#!/usr/bin/env bash\nset -e\n${body}\n`);
    chmodSync(join(dir, name), 0o755);
  }
}
