/**
 * The guard's shell (src/launcher/orphan_guard.ts), driven as ringrun drives it: groups
 * announced and forgotten on its stdin, then the pipe's end, with or without `end` first.
 * The "ranks" are `sleep` processes, each the leader of its own group.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { after, describe, it } from 'node:test';
import { guardArgv } from '../../src/launcher/orphan_guard.js';

const started: ChildProcess[] = [];
after(() => {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

/** A process group of one `sleep`; `ended` resolves with the signal that ended it. */
function rank(): { pid: number; ended: Promise<NodeJS.Signals | null> } {
  const child = spawn('sleep', ['30'], { stdio: 'ignore', detached: true });
  started.push(child);
  const ended = once(child, 'exit').then(([, signal]) => signal as NodeJS.Signals | null);
  return { pid: child.pid as number, ended };
}

/** Runs the guard with `lines` on its stdin, then ends the pipe; resolves with what it printed. */
async function guard(lines: string[]): Promise<{ stderr: string; code: number | null }> {
  const [command, ...args] = guardArgv(4242);
  const child = spawn(command as string, args, { stdio: ['pipe', 'ignore', 'pipe'] });
  started.push(child);
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (text: string) => (stderr += text));
  child.stdin?.end(lines.map((line) => `${line}\n`).join(''));
  const [code] = await once(child, 'exit');
  return { stderr, code: code as number | null };
}

describe('the orphan guard', () => {
  it('at the end of the pipe, stops the groups still announced and names them', async () => {
    const [a, b, c] = [rank(), rank(), rank()];
    const result = await guard([`+${a.pid}:rank_0`, `+${b.pid}:rank_1`, `+${c.pid}:rank_2`, `-${b.pid}`]);
    assert.equal(result.code, 0);
    assert.equal(
      result.stderr,
      `ringrun: ringrun (pid 4242) that started them is gone (killed, or crashed): stopping rank 0 (pid ${a.pid}), rank 2 (pid ${c.pid}) (SIGTERM, SIGKILL after 1 s)\n`,
    );
    assert.equal(await a.ended, 'SIGTERM');
    assert.equal(await c.ended, 'SIGTERM');
    assert.doesNotThrow(() => process.kill(b.pid, 0), 'a forgotten group is left alone');
    process.kill(-b.pid, 'SIGKILL');
  });

  it('leaves without a word or a signal after `end`, or with nothing announced', async () => {
    const a = rank();
    assert.deepEqual(await guard([`+${a.pid}:rank_0`, 'end']), { stderr: '', code: 0 });
    assert.deepEqual(await guard([`+${a.pid}:rank_0`, `-${a.pid}`]), { stderr: '', code: 0 });
    assert.doesNotThrow(() => process.kill(a.pid, 0));
    process.kill(-a.pid, 'SIGKILL');
  });

  it('forgets a group by its whole pid, not by a suffix of another', async () => {
    const a = rank();
    const result = await guard([`+${a.pid}:mpirun`, `-${String(a.pid).slice(1)}`]);
    assert.match(result.stderr, new RegExp(`stopping mpirun \\(pid ${a.pid}\\)`));
    assert.equal(await a.ended, 'SIGTERM');
  });
});
