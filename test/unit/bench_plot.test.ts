/** The bench's plot: the peers' TSV files are read (best of the repetitions, this rank count and op only) and drawn dashed. */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { plotSvg } from '../../bench/plot.js';
import { peerSeries } from '../../bench/plot_peers.js';

const kHeader = '#op\tnranks\tbytes\tcount\titers\tavg_us\tmin_us\tmax_us\talgbw_GBps\tbusbw_GBps\tcheck\n';

test('peer figures from run-peers.sh files, plotted beside ringreduce', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ringreduce-plot-'));
  try {
    mkdirSync(join(dir, 'peers.rep1'));
    mkdirSync(join(dir, 'peers.rep2'));
    const row = (op: string, n: number, bytes: number, us: number) => `${op}\t${n}\t${bytes}\t1\t10\t${us}\t0\t0\t0\t0\tok\n`;
    writeFileSync(
      join(dir, 'peers.rep1', 'coll.mpi-allreduce-tcp-np2.rep1.tsv'),
      kHeader + row('allreduce', 2, 1024, 20) + row('allreduce', 2, 1 << 20, 400),
    );
    writeFileSync(join(dir, 'peers.rep2', 'coll.mpi-allreduce-tcp-np2.rep1.tsv'), kHeader + row('allreduce', 2, 1024, 10));
    writeFileSync(join(dir, 'peers.rep1', 'coll.mpi-allreduce-tcp-np4.rep1.tsv'), kHeader + row('allreduce', 4, 1024, 99));
    writeFileSync(join(dir, 'peers.rep1', 'coll.mpi-bcast-tcp-np2.rep1.tsv'), kHeader + row('bcast', 2, 1024, 5));
    const peers = peerSeries(dir, 'allreduce', 2);
    assert.equal(peers.length, 1);
    const [mpi] = peers;
    assert.equal(mpi?.label, 'OpenMPI TCP allreduce');
    assert.equal(mpi?.peer, true);
    const points = [...(mpi?.points ?? [])].sort((a, b) => a.bytes - b.bytes);
    assert.deepEqual(
      points.map((p) => [p.bytes, p.timeUs]),
      [
        [1024, 10],
        [1 << 20, 400],
      ],
      'best of the repetitions',
    );
    // busbw = algbw × 2(n-1)/n: 1 MiB in 400 µs on 2 ranks.
    assert.ok(Math.abs((points[1]?.busbwGBs ?? 0) - (1 << 20) / 400e-6 / 1e9) < 1e-9);
    const svg = plotSvg(
      [{ label: 'ringreduce <allreduce>', points: [{ bytes: 1024, timeUs: 300, busbwGBs: 0.003 }] }, ...peers],
      'title & more',
    );
    assert.match(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    assert.match(svg, /stroke-dasharray/, 'the peer is dashed');
    assert.match(svg, /ringreduce &#60;allreduce&#62;/, 'labels are escaped');
    assert.match(svg, /title &#38; more/);
    assert.equal((svg.match(/<path /g) ?? []).length, 4, 'two series in two panels');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
