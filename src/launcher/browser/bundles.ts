/**
 * The scripts a browser rank's page loads, each one self-contained ES module:
 *
 * - boot: the page's own script (page/boot.ts), and engine: the rank's engine, run in a module
 *   Web Worker (engine/threads/web_worker.ts): the same for every job, bundled by `npm run build`
 *   (scripts/build-browser.mjs) into dist/browser/;
 * - program: the user's program, behind the prelude that forwards its output (page/rank_prelude.ts),
 *   bundled by esbuild when ringrun starts (a few hundred milliseconds).
 *   'ringreduce' and 'ringreduce/tfjs' resolve to this package's browser build, whatever the
 *   program's folder; everything else resolves from the program's folder as Node would, with the
 *   `browser` condition (so '@tensorflow/tfjs' takes its browser build).
 *
 * A program that imports a Node builtin statically cannot load in a browser: the bundle is
 * refused, naming the file and the module. A dynamic `import('node:fs')` stays as it is and
 * fails only if it runs, so a program may keep Node-only paths behind a check.
 */
import { readFile } from 'node:fs/promises';
import { builtinModules } from 'node:module';
import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import { InvalidArgumentError } from '../../core/errors.js';
import { kPagePaths } from './page_protocol.js';

/** dist/src/ (or src/ when run from the sources): the package's modules the bundles start from. */
const kSourceRoot = fileURLToPath(new URL('../../', import.meta.url));
/** dist/browser/, where the build puts the page's script and the engine's. */
const kBuilt = fileURLToPath(new URL('../../../browser/', import.meta.url));
const kEntries = {
  prelude: resolve(kSourceRoot, 'launcher/browser/page/rank_prelude.js'),
  ringreduce: resolve(kSourceRoot, 'index.js'),
  tfjsAdapter: resolve(kSourceRoot, 'adapters/tfjs/index.js'),
};
const kNodeBuiltins = new Set([...builtinModules, ...builtinModules.map((name) => `node:${name}`)]);

export interface Bundle {
  /** The script's text (JavaScript, an ES module). */
  readonly code: string;
  /** Its source map (served next to it, as `<name>.map`). */
  readonly map?: string;
  /** Files next to it that it loads at run time (the WebAssembly of TF.js's wasm backend): name → path on disk. */
  readonly assets: ReadonlyMap<string, string>;
}

/** The page's script and the engine worker's: the same for every job, built with the package. */
export async function bundleRuntime(): Promise<{ boot: Bundle; engine: Bundle }> {
  const read = async (name: string): Promise<Bundle> => {
    try {
      return { code: await readFile(resolve(kBuilt, name), 'utf8'), assets: new Map() };
    } catch (error) {
      throw new InvalidArgumentError(`the browser ranks' ${name} is missing (${(error as Error).message}): run npm run build`);
    }
  };
  const [boot, engine] = await Promise.all([read('boot.js'), read('engine_worker.js')]);
  return { boot, engine };
}

/** The program a browser rank runs, from `script` (a .js, .mjs or .ts file). */
export async function bundleProgram(script: string): Promise<Bundle> {
  const path = resolve(script);
  try {
    await readFile(path);
  } catch (error) {
    throw new InvalidArgumentError(`the browser ranks' program ${script}: ${(error as Error).message}`);
  }
  const entry = [
    `import ${JSON.stringify(kEntries.prelude)};`,
    `import ${JSON.stringify(path)};`,
    // Module evaluation (top-level await included) is over once this line runs.
    `self.postMessage({ type: 'ringreduce:evaluated' });`,
  ].join('\n');
  return bundle({ contents: entry, resolveDir: dirname(path), sourcefile: 'ringreduce-program-entry.js' }, dirname(path), path);
}

async function bundle(entry: esbuild.StdinOptions, workingDir: string, program: string): Promise<Bundle> {
  const assets = new Map<string, string>();
  const staticNodeImports: string[] = [];
  let result: esbuild.BuildResult<{ write: false; metafile: true }>;
  try {
    result = await esbuild.build({
      stdin: entry,
      absWorkingDir: workingDir,
      bundle: true,
      write: false,
      metafile: true,
      format: 'esm',
      platform: 'browser',
      target: 'chrome120',
      // Linked, not inline: a program's map (its data files' text too) loads only when developer tools open.
      sourcemap: 'linked',
      outfile: kPagePaths.program,
      logLevel: 'silent',
      define: { 'process.env.NODE_ENV': '"production"' },
      plugins: [packageAliases(), nodeBuiltins(staticNodeImports), wasmAssets(assets), largeJson()],
    });
  } catch (error) {
    const failure = error as esbuild.BuildFailure;
    const first = failure.errors?.[0];
    const where = first?.location ? `${relative(process.cwd(), first.location.file)}:${first.location.line}: ` : '';
    throw new InvalidArgumentError(`cannot bundle ${program} for browsers: ${where}${first?.text ?? failure.message}`);
  }
  if (staticNodeImports.length > 0) {
    throw new InvalidArgumentError(
      `${program} cannot run in a browser: ${[...new Set(staticNodeImports)].join('; ')} ` +
        '(a browser rank runs web-standard code only: give --browser-script a file without Node imports, or import them dynamically behind a check)',
    );
  }
  const output = result.outputFiles?.find((file) => file.path.endsWith('.js'));
  if (output === undefined) throw new InvalidArgumentError(`esbuild produced nothing for ${program}`);
  const map = result.outputFiles?.find((file) => file.path.endsWith('.js.map'));
  return { code: output.text, assets, ...(map && { map: map.text }) };
}

/** 'ringreduce' and 'ringreduce/tfjs' are this package, wherever the program lives. */
function packageAliases(): esbuild.Plugin {
  return {
    name: 'ringreduce-aliases',
    setup(build) {
      build.onResolve({ filter: /^ringreduce(\/tfjs)?$/ }, (args) => ({
        path: args.path === 'ringreduce' ? kEntries.ringreduce : kEntries.tfjsAdapter,
      }));
    },
  };
}

/**
 * Node builtins, by how they are asked for: a static `import` is collected, to be refused with
 * its importer's name (the module could not load in a browser); a dynamic `import()` stays as
 * it is (it fails only if it runs); a CommonJS `require()` gets an empty module, as a package's
 * `"browser": { "fs": false }` would give it (Emscripten's output, say, requires fs only where
 * it runs on Node).
 */
export function nodeBuiltins(staticImports: string[]): esbuild.Plugin {
  return {
    name: 'node-builtins',
    setup(build) {
      build.onResolve({ filter: /^[a-z_:/]+$/ }, (args) => {
        if (!kNodeBuiltins.has(args.path)) return undefined;
        if (args.kind === 'require-call') return { path: args.path, namespace: 'empty-builtin' };
        if (args.kind === 'import-statement') {
          staticImports.push(`${relative(process.cwd(), args.importer) || args.importer} imports ${args.path}`);
        }
        return { path: args.path, external: true };
      });
      build.onLoad({ filter: /.*/, namespace: 'empty-builtin' }, () => ({ contents: 'module.exports = {};', loader: 'js' }));
    },
  };
}

/** JSON files past this size are bundled as one string for JSON.parse (largeJson). */
const kLargeJsonBytes = 256 * 1024;

/**
 * A large JSON file (a data set) as `JSON.parse('...')` rather than as an object literal: a
 * browser parses the string several times faster, and bundling it takes a fraction of the time
 * (esbuild need not print, nor map, every value).
 */
function largeJson(): esbuild.Plugin {
  return {
    name: 'large-json',
    setup(build) {
      build.onLoad({ filter: /\.json$/ }, async (args) => {
        const text = await readFile(args.path, 'utf8');
        if (text.length < kLargeJsonBytes) return undefined;
        return { contents: `export default JSON.parse(${JSON.stringify(text)});`, loader: 'js' };
      });
    },
  };
}

/**
 * TF.js's wasm backend fetches its .wasm files from the script's own folder: they are served next
 * to the program. Found from the package's folder when the bundle includes it.
 */
function wasmAssets(assets: Map<string, string>): esbuild.Plugin {
  return {
    name: 'wasm-assets',
    setup(build) {
      build.onLoad({ filter: /tfjs-backend-wasm[\\/]dist[\\/].*\.js$/ }, async (args) => {
        const dist = dirname(args.path.replace(/([\\/]dist)[\\/].*$/, '$1/x'));
        for (const name of ['tfjs-backend-wasm.wasm', 'tfjs-backend-wasm-simd.wasm', 'tfjs-backend-wasm-threaded-simd.wasm']) {
          assets.set(name, resolve(dist, name));
        }
        return undefined;
      });
    },
  };
}
