/**
 * The profiles of headless Chromiums whose ringrun was killed (browser/headless.ts): the next
 * `--headless` removes those whose ringrun is gone, and only those.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, it } from 'node:test';
import { removeStaleProfiles } from '../../src/launcher/browser/headless.js';

const dir = mkdtempSync(join(tmpdir(), 'headless-profiles-'));
after(() => rmSync(dir, { recursive: true, force: true }));

it("removes the profiles of ringruns that are gone, and keeps live ones' and everything else", async () => {
  const gone = spawnSync(process.execPath, ['-e', '']).pid as number; // exited and reaped
  const live = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000)'], { stdio: 'ignore' });
  try {
    const names = {
      gone: `ringrun-chromium-${gone}-AbC123`,
      live: `ringrun-chromium-${live.pid}-dEf456`,
      own: `ringrun-chromium-${process.pid}-gHi789`,
      older: 'ringrun-chromium-XyZ000', // no pid in the name: not ours to judge
      other: 'something-else-1',
    };
    for (const name of Object.values(names)) {
      mkdirSync(join(dir, name, 'Default'), { recursive: true });
      writeFileSync(join(dir, name, 'Default', 'Preferences'), '{}');
    }
    assert.deepEqual(removeStaleProfiles(dir), [names.gone]);
    assert.equal(existsSync(join(dir, names.gone)), false);
    assert.deepEqual(readdirSync(dir).sort(), [names.live, names.own, names.older, names.other].sort());
  } finally {
    live.kill();
  }
});

it('finds nothing to do in a directory that does not exist', () => {
  assert.deepEqual(removeStaleProfiles(join(dir, 'missing')), []);
});
