/**
 * Ranks started by torchrun: its agent hosts its own store on MASTER_ADDR:MASTER_PORT and tells
 * the workers so (TORCHELASTIC_USE_AGENT_STORE=True). A real torch TCPStore (Debian's python3
 * with python3-torch) holds the port the way the agent does; two ranks with torchrun's
 * variables must still form their job (rank 0 hosts ringreduce's store on the port next to it)
 * and leave the agent's store working. When that port is taken too, rank 0 says so plainly.
 * Skips, saying why, where torch is not installed.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { after, describe, it } from 'node:test';
import { cleanEnv, cleanUp, kFailureJob, tempDir } from './fixtures/ringrun_harness.js';

const kPython = '/usr/bin/python3';
const probe = spawnSync(kPython, ['-c', 'import torch.distributed as dist; print(dist.is_available())'], {
  encoding: 'utf8',
  timeout: 30_000,
});
const skip =
  probe.status === 0 && probe.stdout.trim() === 'True' ? false : `no torch here (${kPython} cannot import torch.distributed)`;

/** The agent's stand-in: a torch TCPStore master on `port`, which later checks its store still works. */
const kAgent = `
import sys, torch.distributed as dist
from datetime import timedelta
store = dist.TCPStore('127.0.0.1', int(sys.argv[1]), is_master=True, wait_for_workers=False, timeout=timedelta(seconds=30))
store.set('agent/ready', '1')
print('listening', flush=True)
sys.stdin.readline()  # until the test is done with the ranks
store.set('agent/after', 'ok')
print('store', store.get('agent/after').decode(), flush=True)
`;

interface Ended {
  code: number | null;
  stdout: string;
  stderr: string;
}

function collect(child: ChildProcess): Promise<Ended> {
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (t: string) => (stdout += t));
  child.stderr?.setEncoding('utf8').on('data', (t: string) => (stderr += t));
  const limit = setTimeout(() => child.kill('SIGKILL'), 40_000);
  return new Promise((resolve) =>
    child.once('close', (code) => {
      clearTimeout(limit);
      resolve({ code, stdout, stderr });
    }),
  );
}

/** Starts the agent's store; resolves once it listens, with its process and output. */
async function startAgent(port: number): Promise<{ child: ChildProcess; ended: Promise<Ended> }> {
  const child = spawn(kPython, ['-c', kAgent, String(port)], { stdio: ['pipe', 'pipe', 'pipe'] });
  const ended = collect(child);
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (text: string) => {
      if (text.includes('listening')) resolve();
    });
    void ended.then((e) => reject(new Error(`the TCPStore stand-in exited: ${e.stderr}`)));
  });
  return { child, ended };
}

/** torchrun's worker environment, for one node of `size` workers. */
function torchrunEnv(rank: number, size: number, port: number, extra: Record<string, string>): NodeJS.ProcessEnv {
  return cleanEnv({
    RANK: String(rank),
    LOCAL_RANK: String(rank),
    GROUP_RANK: '0',
    ROLE_RANK: String(rank),
    ROLE_NAME: 'default',
    LOCAL_WORLD_SIZE: String(size),
    WORLD_SIZE: String(size),
    GROUP_WORLD_SIZE: '1',
    ROLE_WORLD_SIZE: String(size),
    MASTER_ADDR: '127.0.0.1',
    MASTER_PORT: String(port),
    TORCHELASTIC_RESTART_COUNT: '0',
    TORCHELASTIC_MAX_RESTARTS: '0',
    TORCHELASTIC_RUN_ID: 'ringreduce-test',
    TORCHELASTIC_USE_AGENT_STORE: 'True',
    MODE: 'loop',
    ...extra,
  });
}

/** Whether `port` can be bound on every interface right now. */
function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen({ port, host: '0.0.0.0', exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/**
 * A MASTER_PORT whose next port is free too, below the ephemeral range as torchrun's 29500 is
 * (two ephemeral ports in a row are often not both free on a busy machine).
 */
async function masterPort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if ((await bindable(port)) && (await bindable(port + 1))) return port;
  }
}

const dirs: string[] = [];
after(() => {
  for (const d of dirs) cleanUp(d);
});

describe("ranks under torchrun's agent store", { skip, timeout: 90_000 }, () => {
  it('form their job next to the agent store, which keeps working', { timeout: 45_000 }, async () => {
    const dir = tempDir('ringrun-torchrun-');
    dirs.push(dir);
    const port = await masterPort();
    const agent = await startAgent(port);
    try {
      const ranks = [0, 1].map((rank) =>
        collect(
          spawn(process.execPath, [kFailureJob], {
            env: torchrunEnv(rank, 2, port, { DIR: dir, ITERATIONS: '3', RINGREDUCE_START_TIMEOUT_MS: '10000' }),
            stdio: ['ignore', 'pipe', 'pipe'],
          }),
        ),
      );
      for (const [rank, ended] of (await Promise.all(ranks)).entries()) {
        assert.equal(ended.code, 0, `rank ${rank}:\n${ended.stdout}\n${ended.stderr}`);
        assert.match(ended.stdout, /^done$/m);
        assert.match(
          ended.stdout,
          new RegExp(`^\\{"rank":${rank},"size":2,"localRank":${rank},"localSize":2,"crossRank":0,"crossSize":1\\}$`, 'm'),
        );
      }
    } finally {
      agent.child.stdin?.end('\n');
    }
    const ended = await agent.ended;
    assert.equal(ended.code, 0, ended.stderr);
    assert.match(ended.stdout, /store ok/);
  });

  it('rank 0 says plainly which port is taken when the one next to the agent store is too', { timeout: 45_000 }, async () => {
    const port = await masterPort();
    const agent = await startAgent(port);
    const squatter: Server = createServer();
    await new Promise<void>((resolve) => squatter.listen(port + 1, '127.0.0.1', resolve));
    try {
      const rank0 = await collect(
        spawn(process.execPath, [kFailureJob], {
          env: torchrunEnv(0, 2, port, { DIR: tempDir('ringrun-torchrun-busy-'), RINGREDUCE_START_TIMEOUT_MS: '3000' }),
          stdio: ['ignore', 'pipe', 'pipe'],
        }),
      );
      assert.notEqual(rank0.code, 0);
      assert.match(
        rank0.stderr,
        new RegExp(
          `cannot host the rendezvous store on 127\\.0\\.0\\.1:${port + 1}: the port is in use.*torchrun's agent on MASTER_PORT`,
        ),
      );
    } finally {
      squatter.close();
      agent.child.stdin?.end('\n');
      await agent.ended;
    }
  });
});
