/**
 * The transport contract (test/helpers/transport_contract.ts) over the MPI backend, one rank per
 * process under mpirun (fixture: fixtures/transport_contract_job.ts). The header of the contract
 * helper says which clauses MPI does not exercise, and why.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describeRun, mpirun, mpiSkipReason } from '../helpers/mpi_run.js';
import { type ContractCase, kContractCases } from '../helpers/transport_contract.js';

const skip = mpiSkipReason();

/** Whether `contractCase` can run on the one transport the other cases share (see the fixture). */
const sharesTheTransport = (contractCase: ContractCase) => !contractCase.breaksLinks && contractCase.leaves !== 'failed';

const shared = kContractCases.filter(sharesTheTransport);
const alone = kContractCases.filter((c) => !c.breaksLinks && !sharesTheTransport(c));

const allOk = (cases: readonly ContractCase[]) => Object.fromEntries(cases.map((c) => [c.id, 'ok']));

test(`3 ranks, one transport: ${shared.map((c) => c.id).join(', ')}`, { skip }, async () => {
  const run = await mpirun(3, 'transport_contract_job', { args: shared.map((c) => c.id), timeoutMs: 90_000 });
  assert.equal(run.reports.length, 3, describeRun(run));
  for (const r of run.reports) assert.deepEqual(r.results, allOk(shared), `rank ${r.rank}\n${describeRun(run)}`);
  assert.equal(run.code, 0, describeRun(run));
});

for (const contractCase of alone) {
  // The exit code is not the contract's: after a failed peer MPI is not finalised, and mpirun
  // ends the job (test/multiprocess/mpi_transport.test.ts checks that).
  test(`2 ranks: ${contractCase.title}`, { skip }, async () => {
    const run = await mpirun(2, 'transport_contract_job', { args: [contractCase.id], timeoutMs: 60_000 });
    assert.equal(run.reports.length, 2, describeRun(run));
    for (const r of run.reports) assert.deepEqual(r.results, allOk([contractCase]), `rank ${r.rank}\n${describeRun(run)}`);
  });
}
