import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseArgs } from '../../src/launcher/cli.js';
import {
  ElasticHosts,
  kBlacklistAfter,
  kCooldownMs,
  kMaxCooldownMs,
  kThisHost,
  parseDiscovered,
} from '../../src/launcher/elastic_hosts.js';

const local = (host: string) => host === 'localhost' || host === 'me';

describe('elastic hosts', () => {
  it('parses the discovery script: host[:slots] lines, comments, bracketed IPv6; refuses bad lines naming them', () => {
    assert.deepEqual(parseDiscovered('# pool\na:2\n\n  b\n[fd00::1]:3\n'), [
      { host: 'a', slots: 2 },
      { host: 'b', slots: 1 },
      { host: 'fd00::1', slots: 3 },
    ]);
    assert.throws(() => parseDiscovered('a:0'), /line 'a:0'.*slots must be a positive integer/);
    assert.throws(() => parseDiscovered('a;b:1'), /bad host name/);
    assert.throws(() => parseDiscovered('-oProxyCommand=x'), /line '-oProxyCommand=x' is not host\[:slots\]/);
    assert.throws(() => parseDiscovered('a:1,b:1'), /is not host\[:slots\]/);
  });

  it('keeps this machine under one name, and says which hosts are no longer listed', () => {
    const hosts = new ElasticHosts(local);
    assert.deepEqual(
      hosts.list([
        { host: 'me', slots: 1 },
        { host: 'localhost', slots: 1 },
        { host: 'b', slots: 2 },
      ]),
      [],
    );
    assert.deepEqual(hosts.free(new Map(), 0), [
      { host: kThisHost, free: 2 },
      { host: 'b', free: 2 },
    ]);
    assert.ok(hosts.anyRemote());
    assert.deepEqual(hosts.free(new Map([['b', 2]]), 0), [{ host: kThisHost, free: 2 }]);
    assert.deepEqual(hosts.list([{ host: 'c', slots: 1 }]), [kThisHost, 'b']);
    assert.ok(!hosts.listed('b'));
  });

  it(`blacklists a host from its ${kBlacklistAfter}nd failure, for a cool-down that doubles (capped), counting one failure per generation`, () => {
    const hosts = new ElasticHosts(local);
    hosts.list([{ host: 'b', slots: 1 }]);
    assert.equal(hosts.fail('b', 1, 0), undefined, 'the first failure only makes its workers leave');
    assert.equal(hosts.fail('b', 1, 0), undefined, 'a second worker failing in the same generation counts once');
    assert.equal(hosts.failures('b'), 1);
    assert.equal(hosts.fail('b', 2, 1000), kCooldownMs);
    assert.ok(hosts.blacklisted('b', 1000 + kCooldownMs - 1));
    assert.deepEqual(hosts.free(new Map(), 1000), []);
    assert.ok(!hosts.blacklisted('b', 1000 + kCooldownMs));
    assert.deepEqual(hosts.free(new Map(), 1000 + kCooldownMs), [{ host: 'b', free: 1 }]);
    assert.equal(hosts.fail('b', 3, 0), 2 * kCooldownMs);
    assert.equal(hosts.fail('b', 4, 0), 4 * kCooldownMs);
    for (let g = 5; g < 20; g++) hosts.fail('b', g, 0);
    assert.equal(hosts.fail('b', 20, 0), kMaxCooldownMs);
  });

  it('--elastic takes -H and --hostfile, but not with --host-discovery-script', () => {
    const parsed = parseArgs(['--elastic', '--min-np', '2', '-H', 'a:2,b:2', 'node', 'x.js']);
    assert.ok('config' in parsed && parsed.config.elastic !== undefined && parsed.config.hosts?.length === 2);
    assert.throws(
      () => parseArgs(['--elastic', '-H', 'a:2', '--host-discovery-script', './d.sh', 'node']),
      /--host-discovery-script lists the hosts: give it or -H\/--hostfile, not both/,
    );
  });
});
