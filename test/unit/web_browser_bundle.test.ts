/**
 * What a browser rank loads of the web backend bundles for the browser: no Node import anywhere
 * below browser_openers.ts (the backend, its transport and mesh, the store client) or the store
 * bridge. esbuild, which bundles a rank's program for the page, refuses a Node built-in on the
 * 'browser' platform, so a `node:` import slipping into one of these files fails here.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const kRoot = fileURLToPath(new URL('../../../', import.meta.url));

it("the web backend's browser side and the store bridge bundle for the browser, with no Node built-in", async () => {
  const result = await build({
    entryPoints: ['src/transport/web/browser_openers.ts', 'src/rendezvous/web_store_bridge.ts'],
    absWorkingDir: kRoot,
    bundle: true,
    platform: 'browser',
    format: 'esm',
    write: false,
    outdir: 'out',
    metafile: true,
    logLevel: 'silent',
  });
  assert.deepEqual(result.errors, []);
  const inputs = Object.keys(result.metafile.inputs);
  assert.ok(inputs.includes('src/transport/web/web_transport.ts'), inputs.join(', '));
  assert.deepEqual(
    inputs.filter((path) => !path.startsWith('src/')),
    [],
    'only our sources: no package and no built-in',
  );
});
