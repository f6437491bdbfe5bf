/** The agreed settings' canonical text, digest and message (core/agreed_settings.ts), and ringrun forwarding them to browser ranks. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { agreedConfigText, agreedSettingsText, kAgreedSettings } from '../../src/core/agreed_settings.js';
import { resolveConfig } from '../../src/core/config.js';
import { describeDisagreement, digestOf } from '../../src/core/settings_disagreement.js';
import { jobWideEnv, kJobWideVariables } from '../../src/launcher/env_contract.js';

const text = (options: Parameters<typeof resolveConfig>[0], env: Record<string, string> = {}) =>
  agreedSettingsText(resolveConfig(options, env));

test('the agreed settings are the ones that decide the wire or the algorithm', () => {
  assert.deepEqual(
    kAgreedSettings.map((s) => s.name),
    [
      'fusionThresholdBytes',
      'cacheCapacity',
      'segmentBytes',
      'hierarchicalAllreduce',
      'hierarchicalAllgather',
      'readyExchange',
      'costModel',
      'algorithms',
      'autotune',
    ],
  );
});

test('the same values give the same text whether an option or a variable sets them, in any spelling', () => {
  const defaults = text({});
  assert.equal(text({}, { RINGREDUCE_SEGMENT_BYTES: '4194304', RINGREDUCE_HIERARCHICAL_ALLREDUCE: 'auto' }), defaults);
  assert.equal(text({ algorithms: { allreduce: 'auto' } }), defaults);
  assert.equal(text({}, { RINGREDUCE_ALGORITHMS: 'broadcast=auto' }), defaults);
  assert.equal(text({}, { RINGREDUCE_COST_MODEL: 'beta=1e-10,alpha=2e-5' }), text({ costModel: { alpha: 2e-5, beta: 1e-10 } }));
  assert.equal(text({}, { RINGREDUCE_HIERARCHICAL_ALLGATHER: '1' }), text({ hierarchicalAllgather: 'on' }));
  // A setting no rank must share leaves it alone.
  assert.equal(text({ stallTimeoutMs: 5, logLevel: 'debug', burstHoldMs: 0 }), defaults);
  assert.equal(digestOf(text({ segmentBytes: 4194304 })), digestOf(defaults));
  assert.notEqual(digestOf(text({ segmentBytes: 1048576 })), digestOf(defaults));
  assert.match(defaults, /^RINGREDUCE_FUSION_THRESHOLD_BYTES \(init option fusionThresholdBytes\)=16777216\n/);
  assert.match(defaults, /^RINGREDUCE_ALGORITHMS \(init option algorithms\)=unset$/m);
});

test('the process sets defined at init() are compared too, in their order', () => {
  const config = (processSets?: number[][]) =>
    resolveConfig({ size: 4, rank: 0, storeAddress: 'h:1', ...(processSets && { processSets }) }, {});
  assert.match(agreedConfigText(config()), /\ninit option processSets=none$/);
  assert.match(
    agreedConfigText(
      config([
        [0, 1],
        [2, 3],
      ]),
    ),
    /\ninit option processSets=\[0,1\] \[2,3\]$/,
  );
  const texts = [
    agreedConfigText(
      config([
        [0, 1],
        [2, 3],
      ]),
    ),
    agreedConfigText(
      config([
        [2, 3],
        [0, 1],
      ]),
    ),
  ];
  assert.deepEqual(describeDisagreement(texts), [
    'init option processSets differs between ranks: rank 0 has [0,1] [2,3], rank 1 has [2,3] [0,1]',
  ]);
});

test('the message names each setting that differs and which ranks have which value', () => {
  const base = text({});
  const texts = [base, text({ segmentBytes: 1024 }), base, base, text({ segmentBytes: 1024, autotune: true })];
  assert.deepEqual(describeDisagreement(texts), [
    'RINGREDUCE_SEGMENT_BYTES (init option segmentBytes) differs between ranks: ranks 0, 2, 3 have 4194304, ranks 1, 4 have 1024',
    'RINGREDUCE_AUTOTUNE (init option autotune) differs between ranks: ranks 0, 1, 2, 3 have false, rank 4 has true',
  ]);
  assert.deepEqual(describeDisagreement([base, base]), []);
  // A large job lists a few ranks per value.
  const many = [...new Array(20).fill(base), text({ cacheCapacity: 0 })];
  assert.match(describeDisagreement(many)[0] ?? '', /ranks 0, 1, 2, 3, 4, 5, 6, 7 and 12 more have 1024, rank 20 has 0$/);
});

test('ringrun gives browser ranks every agreed setting of its environment (RINGREDUCE_COST_MODEL included)', () => {
  for (const { env } of kAgreedSettings) assert.ok(kJobWideVariables.includes(env), env);
  assert.deepEqual(jobWideEnv({ RINGREDUCE_COST_MODEL: 'off', RINGREDUCE_TLS: '1' }), { RINGREDUCE_COST_MODEL: 'off' });
});
