/**
 * The deployment recipes of examples/deploy/ that cannot run here: kubernetes.yaml validated
 * against the Kubernetes API schemas (kubernetes-models: types, required fields, enums; it lets
 * unknown fields through) and checked for what a ringreduce job needs; the ringrun arguments of
 * the manifest and of the sbatch script parsed as ringrun parses them; the Dockerfile checked
 * structurally (no Docker daemon here). deploy_sbatch.test.ts runs the sbatch script.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Job } from 'kubernetes-models/batch/v1/Job';
import { Service } from 'kubernetes-models/v1/Service';
import { parseAllDocuments } from 'yaml';
import { parseArgs } from '../../src/launcher/cli.js';

const kDeploy = fileURLToPath(new URL('../../../examples/deploy/', import.meta.url));
const read = (name: string) => readFileSync(`${kDeploy}${name}`, 'utf8');

interface Manifest {
  kind: string;
  metadata: { name: string };
  // biome-ignore lint/suspicious/noExplicitAny: the rest is checked by the schema validation below
  spec: any;
}

function manifests(): Manifest[] {
  const docs = parseAllDocuments(read('kubernetes.yaml'));
  for (const doc of docs) assert.deepEqual(doc.errors, [], 'YAML errors');
  return docs.map((doc) => doc.toJS() as Manifest);
}

describe('kubernetes.yaml', () => {
  it('is a Service and a Job that the Kubernetes API schemas accept', () => {
    const [service, job, ...rest] = manifests();
    assert.deepEqual(rest, []);
    assert.equal(service?.kind, 'Service');
    assert.equal(job?.kind, 'Job');
    new Service(service as never).validate();
    new Job(job as never).validate();
    // The validator does catch errors: a wrong type, a missing container name.
    const broken = structuredClone(job) as Manifest;
    broken.spec.completions = 'two';
    delete broken.spec.template.spec.containers[0].name;
    assert.throws(() => new Job(broken as never).validate(), /completions must be integer.*must have required property name/s);
  });

  it('gives every pod its node index, pod 0 a name the others reach, and ringrun agreeing flags', () => {
    const [service, job] = manifests() as [Manifest, Manifest];
    const spec = job.spec;
    assert.equal(spec.completionMode, 'Indexed');
    assert.equal(spec.completions, spec.parallelism);
    assert.equal(spec.backoffLimit, 0);
    const pod = spec.template.spec;
    assert.equal(pod.restartPolicy, 'Never');
    // Pod i is <job>-i.<subdomain>: the subdomain is the headless Service, which selects the Job's pods.
    assert.equal(pod.subdomain, service.metadata.name);
    assert.equal(service.spec.clusterIP, 'None');
    assert.equal(service.spec.publishNotReadyAddresses, true);
    assert.deepEqual(service.spec.selector, { 'job-name': job.metadata.name });
    const container = pod.containers[0];
    const env = new Map<string, { valueFrom?: Record<string, Record<string, string>> }>(
      container.env.map((e: { name: string }) => [e.name, e]),
    );
    assert.equal(
      env.get('NODE_RANK')?.valueFrom?.fieldRef?.fieldPath,
      "metadata.annotations['batch.kubernetes.io/job-completion-index']",
    );
    assert.ok(env.get('RINGREDUCE_SECRET')?.valueFrom?.secretKeyRef, 'the secret comes from a Secret');
    assert.ok(
      pod.volumes.some((v: { emptyDir?: { medium?: string } }) => v.emptyDir?.medium === 'Memory') &&
        container.volumeMounts.some((m: { mountPath: string }) => m.mountPath === '/dev/shm'),
      'a memory-backed /dev/shm',
    );
    // ringrun's arguments, as Kubernetes expands them for pod 1.
    const args = (container.args as string[]).map((a) => a.replace('$(NODE_RANK)', '1'));
    const parsed = parseArgs(args, () => '', {});
    assert.equal(parsed.kind, 'launch');
    if (parsed.kind !== 'launch') return;
    const perNode = parsed.config.perNode;
    assert.equal(perNode?.nnodes, spec.completions);
    assert.equal(perNode?.nodeRank, 1);
    assert.deepEqual(perNode?.endpoint, {
      host: `${job.metadata.name}-0.${service.metadata.name}`,
      port: service.spec.ports[0].port,
    });
    assert.equal(container.ports[0].containerPort, service.spec.ports[0].targetPort);
  });
});

describe('ringreduce.sbatch', () => {
  it('runs one ringrun per node whose flags ringrun accepts under Slurm', () => {
    const script = read('ringreduce.sbatch');
    assert.match(script, /^#SBATCH --ntasks-per-node=1$/m);
    assert.match(script, /^export RINGREDUCE_SECRET=/m);
    // Since Slurm 22.05 srun does not inherit --cpus-per-task from sbatch: without it, a node's ranks share one CPU.
    assert.match(script, /^#SBATCH --cpus-per-task=\d+$/m);
    assert.match(script, /^srun [^\n]*--cpus-per-task="\$\{SLURM_CPUS_PER_TASK/m);
    const line = /srun --ntasks-per-node=1 [^\n]*\\\n\s*"\$RINGRUN" ([^\n]*)\\\n\s*node /.exec(script);
    assert.ok(line, 'the srun line');
    const flags = (line[1] as string).replace('"$NPROC_PER_NODE"', '4').trim().split(/\s+/);
    const parsed = parseArgs([...flags, 'node', 'train.js'], () => '', {
      SLURM_JOB_ID: '9',
      SLURM_STEP_ID: '0',
      SLURM_NODEID: '1',
      SLURM_NNODES: '2',
      SLURM_JOB_NODELIST: 'cn[07-08]',
    });
    assert.equal(parsed.kind, 'launch');
    if (parsed.kind !== 'launch') return;
    assert.deepEqual([parsed.config.perNode?.nnodes, parsed.config.perNode?.nodeRank, parsed.config.np], [2, 1, 8]);
    assert.equal(parsed.config.perNode?.endpoint?.host, 'cn07');
  });
});

describe('Dockerfile', () => {
  it('(structural check only: no Docker daemon here) runs ringrun from a supported Node image', () => {
    const text = read('Dockerfile');
    const from = /^FROM node:(\d+)[-\w.]*$/m.exec(text);
    assert.ok(from, 'FROM node:<major>...');
    assert.ok([20, 22, 24].includes(Number(from[1])), `node ${from[1]} is not a version package.json's engines names`);
    assert.match(text, /^RUN npm ci --omit=dev/m);
    assert.match(text, /^ENTRYPOINT \["\/app\/node_modules\/\.bin\/ringrun"\]$/m);
    assert.doesNotMatch(text, /nodedir/);
  });
});
