/**
 * TF.js's wasm backend (an Emscripten module) makes Node exit with code 7 and print its own line
 * on top for any uncaught error. With the adapter imported, a program that fails after loading
 * the backend exits as Node does without it: code 1, the program's error on top
 * (adapters/tfjs/node_error_handling.ts).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const kJob = fileURLToPath(new URL('./fixtures/tfjs_wasm_error_job.js', import.meta.url));

for (const [fail, message] of [
  ['throw', 'a bad batch in the program'],
  ['reject', 'a rejected step in the program'],
] as const) {
  test(`an ${fail === 'throw' ? 'uncaught error' : 'unhandled rejection'} after the wasm backend started exits 1 with the program's error`, {
    timeout: 60_000,
  }, () => {
    const result = spawnSync(process.execPath, [kJob, '--fail', fail], { encoding: 'utf8', timeout: 50_000 });
    assert.match(result.stdout, /backend wasm/, result.stderr);
    assert.equal(result.status, 1, result.stderr);
    assert.doesNotMatch(result.stderr, /tf-backend-wasm/, 'the backend is not named as the culprit');
    const top = result.stderr.split('\n').find((line) => line.trim() !== '') ?? '';
    assert.match(top, /tfjs_wasm_error_job\.js/, `the first line names the program: ${top}`);
    assert.match(result.stderr, new RegExp(`Error: ${message}`));
  });
}
