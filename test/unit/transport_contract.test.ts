/**
 * The transport contract (test/helpers/transport_contract.ts) against every backend that runs
 * N ranks in this process, each world built through the backend's factory where it can be:
 * memory in its four delivery modes, tcp over the test mesh (whose sockets can be cut) and with
 * the job's own settings through tcpBackend, web (Node ranks over loopback WebSockets through
 * createWebBackend, a WebSocket terminated to cut a link), and solo. MPI runs the same cases under mpirun
 * (test/multiprocess/transport_contract_mpi.test.ts). Also here: which factory of the backend
 * table (src/transport/backends.ts) a configuration chooses.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { type InitOptions, resolveConfig } from '../../src/core/config.js';
import { InvalidArgumentError } from '../../src/core/errors.js';
import { Logger } from '../../src/core/logger.js';
import type { BackendFactory, TransportHandle } from '../../src/transport/backend.js';
import { chooseBackend, kBackends } from '../../src/transport/backends.js';
import { createMemoryWorld, type MemoryWorldOptions, memoryBackend } from '../../src/transport/memory/memory_transport.js';
import { soloBackend } from '../../src/transport/solo_transport.js';
import { tcpBackend } from '../../src/transport/tcp/index.js';
import { type ContractWorld, casesFor, kContractIoTimeoutMs } from '../helpers/transport_contract.js';
import { freePort } from '../helpers/world.js';
import { cutLink, makeWorld } from './tcp_test_helpers.js';
import { makeWebWorld } from './web_test_helpers.js';

const kSilent = new Logger('[contract]', 'error', () => {});

interface HeldWorld extends ContractWorld {
  close(): Promise<void>;
}

interface Flavour {
  name: string;
  sizes: readonly number[];
  canBreakLinks: boolean;
  build(size: number, ioTimeoutMs: number): Promise<HeldWorld>;
}

/** Every rank of a job of `size` connected through `factory`, concurrently, as separate processes would. */
async function connectEveryRank(
  factory: BackendFactory,
  size: number,
  options: InitOptions & { ioTimeoutMs: number },
): Promise<TransportHandle[]> {
  const jobId = randomBytes(6).toString('hex');
  const configs = Array.from({ length: size }, (_, rank) =>
    resolveConfig({ rank, size, storeAddress: '127.0.0.1:1', jobId, startTimeoutMs: 10_000, logLevel: 'error', ...options }, {}),
  );
  return Promise.all(configs.map((config) => factory(config, kSilent)));
}

function heldWorld(handles: readonly TransportHandle[], breakLink?: (a: number, b: number) => void): HeldWorld {
  return {
    size: handles.length,
    local: handles.map((h) => h.transport),
    ...(breakLink === undefined ? {} : { breakLink }),
    close: async () => {
      await Promise.all(handles.map((h) => h.close()));
    },
  };
}

function memoryFlavour(mode: string, options: MemoryWorldOptions): Flavour {
  return {
    name: `memory (${mode})`,
    sizes: [2, 3],
    canBreakLinks: true,
    build: async (size, ioTimeoutMs) => {
      const world = createMemoryWorld(size, { ...options, ioTimeoutMs });
      const handles = await connectEveryRank(memoryBackend(world), size, { ioTimeoutMs });
      return heldWorld(handles, (a, b) => world.breakLink(a, b));
    },
  };
}

const kFlavours: readonly Flavour[] = [
  memoryFlavour('microtask delivery', { delivery: 'microtask' }),
  memoryFlavour('macrotask delivery', { delivery: 'macrotask' }),
  memoryFlavour('jitter', { jitter: { seed: 7, maxHops: 4 } }),
  memoryFlavour('rendezvous', { rendezvous: true }),
  {
    name: 'tcp (test mesh over loopback, sockets cut to break a link)',
    sizes: [2, 3],
    canBreakLinks: true,
    build: async (size, ioTimeoutMs) => {
      const world = await makeWorld(size, { ioTimeoutMs });
      return {
        size,
        local: world.transports,
        breakLink: (a, b) => cutLink(world, a, b),
        close: () => world.close(),
      };
    },
  },
  {
    name: "tcp (tcpBackend: the job's settings, store, shared fate, heartbeats, Unix sockets, shared-memory lane)",
    sizes: [2, 3],
    canBreakLinks: false,
    build: async (size, ioTimeoutMs) => {
      const storeAddress = `127.0.0.1:${await freePort()}`;
      return heldWorld(await connectEveryRank(tcpBackend, size, { ioTimeoutMs, storeAddress, secret: 'contract' }));
    },
  },
  {
    name: "web (createWebBackend with Node's openers over loopback WebSockets, a TcpStoreServer as the store, WebSockets terminated to break a link)",
    sizes: [2, 3],
    canBreakLinks: true,
    build: async (size, ioTimeoutMs) => {
      const world = await makeWebWorld(size, { ioTimeoutMs });
      return { ...heldWorld(world.handles, (a, b) => world.log.cut(a, b)), close: world.close };
    },
  },
  {
    name: 'solo',
    sizes: [1],
    canBreakLinks: false,
    build: async (size, ioTimeoutMs) => heldWorld(await connectEveryRank(soloBackend, size, { ioTimeoutMs })),
  },
];

for (const flavour of kFlavours) {
  describe(`transport contract: ${flavour.name}`, () => {
    for (const size of flavour.sizes) {
      for (const contractCase of casesFor(size, flavour)) {
        it(`${size} ranks: ${contractCase.title}`, { timeout: 30_000 }, async () => {
          const world = await flavour.build(size, contractCase.ioTimeoutMs ?? kContractIoTimeoutMs);
          try {
            await contractCase.run(world);
          } finally {
            await world.close();
          }
        });
      }
    }
  });
}

describe('backend factories', () => {
  it('every backend of the table runs the contract', () => {
    // tcp, web and solo above; mpi under mpirun (test/multiprocess/transport_contract_mpi.test.ts).
    assert.deepEqual(Object.keys(kBackends).sort(), ['mpi', 'solo', 'tcp', 'web'], 'a new backend needs its flavour here');
  });

  it('refuse a configuration they cannot serve', async () => {
    const two = resolveConfig({ rank: 0, size: 2, storeAddress: '127.0.0.1:1' }, {});
    await assert.rejects(soloBackend(two, kSilent), InvalidArgumentError);
    await assert.rejects(memoryBackend(createMemoryWorld(3))(two, kSilent), /this memory world has 3 ranks/);
  });
});

describe('chooseBackend: the backend a configuration chooses', () => {
  const underMpi = (rank: number, size: number) => ({ OMPI_COMM_WORLD_RANK: String(rank), OMPI_COMM_WORLD_SIZE: String(size) });
  const kChoices: Array<{ given: string; options: InitOptions; env?: Record<string, string>; addon?: boolean; chosen: string }> =
    [
      { given: 'tcp, 2 ranks', options: { backend: 'tcp', size: 2, rank: 1, storeAddress: '127.0.0.1:1' }, chosen: 'tcp' },
      { given: 'tcp, 1 rank', options: { backend: 'tcp' }, chosen: 'solo' },
      { given: 'tcp under mpirun', options: { backend: 'tcp', storeAddress: '127.0.0.1:1' }, env: underMpi(0, 2), chosen: 'tcp' },
      { given: 'auto, 1 rank', options: {}, chosen: 'solo' },
      { given: 'auto, 2 ranks, no MPI launcher', options: { size: 2, rank: 0, storeAddress: '127.0.0.1:1' }, chosen: 'tcp' },
      { given: 'auto under mpirun with the addon', options: {}, env: underMpi(1, 2), addon: true, chosen: 'mpi' },
      { given: 'auto under mpirun without the addon', options: {}, env: underMpi(1, 2), addon: false, chosen: 'tcp' },
      { given: 'auto under mpirun, 1 rank', options: {}, env: underMpi(0, 1), chosen: 'solo' },
      { given: 'mpi, 1 rank', options: { backend: 'mpi' }, chosen: 'mpi' },
      { given: 'mpi under mpirun', options: { backend: 'mpi' }, env: underMpi(0, 3), chosen: 'mpi' },
      { given: 'web, 2 ranks', options: { backend: 'web', size: 2, rank: 1, storeAddress: '127.0.0.1:1' }, chosen: 'web' },
      { given: 'web, 1 rank', options: { backend: 'web' }, chosen: 'solo' },
      {
        given: 'web under mpirun',
        options: { backend: 'web', storeUrl: 'ws://127.0.0.1:1/store' },
        env: underMpi(0, 2),
        chosen: 'web',
      },
    ];
  for (const { given, options, env = {}, addon, chosen } of kChoices) {
    it(`${given}: ${chosen}`, async () => {
      const lines: string[] = [];
      const log = new Logger('[choice]', 'info', (line) => lines.push(line));
      let probed = false;
      const addonLoads = async () => {
        probed = true;
        return addon ?? assert.fail('the addon was probed, but this configuration does not need it');
      };
      assert.equal(await chooseBackend(resolveConfig(options, env), log, addonLoads), chosen);
      assert.equal(probed, addon !== undefined, 'probed the addon');
      const fellBack = addon === false;
      assert.deepEqual(
        lines.map((line) => line.includes('INFO: started by an MPI launcher, but the MPI addon is not built: using TCP')),
        fellBack ? [true] : [],
      );
    });
  }
});
