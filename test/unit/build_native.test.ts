/**
 * scripts/build-native.mjs finds Node's headers itself (no `nodedir` committed in .npmrc, which
 * broke every machine whose headers are elsewhere): Debian's /usr/include/node for
 * /usr/bin/node, node-gyp's default for any other node, and an explicit npm_config_nodedir wins.
 * The command is checked with --dry-run (nothing is built). gyp's configure step (no compiler run)
 * writes its makefiles under native/build only, in a copy of native/ beside the repository's
 * node_modules, as in a clone.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const kRoot = fileURLToPath(new URL('../../../', import.meta.url));
const kScript = join(kRoot, 'scripts', 'build-native.mjs');
const dirs: string[] = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** The node-gyp command the script would run with `node` (MPI_CFLAGS: as if MPI were installed). */
function dryRun(node: string, env: Record<string, string> = {}): string {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('npm_config_')));
  return execFileSync(node, [kScript, '--dry-run'], { env: { ...clean, MPI_CFLAGS: '-I/none', ...env }, encoding: 'utf8' });
}

describe('build-native', () => {
  it('no nodedir is committed in .npmrc', () => {
    const npmrc = join(kRoot, '.npmrc');
    if (existsSync(npmrc)) assert.doesNotMatch(readFileSync(npmrc, 'utf8'), /^\s*nodedir\s*=/m);
  });

  it("Debian's node gets /usr/include/node", { skip: process.execPath !== '/usr/bin/node' && 'not /usr/bin/node' }, () => {
    if (!existsSync('/usr/include/node/node_api.h')) return;
    assert.match(dryRun('/usr/bin/node'), / --nodedir=\/usr\n$/);
  });

  it("any other node is left to node-gyp's default; npm_config_nodedir wins", () => {
    const dir = mkdtempSync(join(tmpdir(), 'rr-node-'));
    dirs.push(dir);
    const node = join(dir, 'node');
    copyFileSync(process.execPath, node);
    execFileSync('chmod', ['+x', node]);
    // A node elsewhere finds no node-gyp next to it: give it the one this node's npm has, as npm does.
    const gyp = dryRun(process.execPath).split(' ')[1] as string;
    const command = dryRun(node, { npm_config_node_gyp: gyp });
    assert.match(command, / rebuild --directory .*native -j 2\n$/);
    assert.doesNotMatch(command, /--nodedir/);
    assert.match(
      dryRun(node, { npm_config_node_gyp: gyp, npm_config_nodedir: '/opt/node-headers' }),
      / --nodedir=\/opt\/node-headers\n$/,
    );
  });

  it('configuring the addon writes files under native/build only', () => {
    const dir = mkdtempSync(join(tmpdir(), 'rr-gyp-'));
    dirs.push(dir);
    const native = join(dir, 'native');
    cpSync(join(kRoot, 'native'), native, { recursive: true, filter: (path) => !path.includes(`native${'/'}build`) });
    symlinkSync(join(kRoot, 'node_modules'), join(dir, 'node_modules'));
    const files = () => readdirSync(native, { recursive: true }).map((path) => join('native', String(path)));
    const before = new Set(files());
    // The install script's own command, with configure (gyp only) for rebuild, in the copy.
    const [, gyp, , , , ...rest] = dryRun(process.execPath).trim().split(' ');
    const flags = rest.filter((arg) => arg.startsWith('--nodedir'));
    execFileSync(process.execPath, [gyp as string, 'configure', '--directory', native, ...flags], {
      cwd: native,
      env: { ...process.env, MPI_CFLAGS: '-I/none', MPI_LIBS: '-lmpi' },
      stdio: 'pipe',
    });
    const added = files().filter((path) => !before.has(path));
    assert.ok(added.includes(join('native', 'build', 'Makefile')), `configure wrote ${added.join(', ')}`);
    const outside = added.filter((path) => path !== join('native', 'build') && !path.startsWith(join('native', 'build', '')));
    assert.deepEqual(outside, [], 'files written outside native/build');
  });
});
