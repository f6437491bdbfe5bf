#!/usr/bin/env node
// node-floor.mjs -- what plain Node.js (v20, no addons, no deps) can do on this box:
// the floor a TypeScript allreduce starts from.
//
//   node bench/peers/node-floor.mjs [section ...] [--reps=N] [--json=/tmp/x.json] [--quiet-wait=S]
//   node bench/peers/node-floor.mjs --merge=/tmp/a.json,/tmp/b.json   (pool runs, print one table;
//                                      "CPU idle before" then shows the lowest seen)
//     sections: loops net latency workers      (default: all)
//
//   loops    (a) JS `for (let i=0;i<n;i++) a[i]+=b[i]` over 64 MiB (and 1 MiB)
//                Float32Array / Float64Array / BigInt64Array; also TypedArray.set copy
//                GB/s = bytes of one array / time  (same definition as membw.c);
//                plus a hand-assembled WebAssembly SIMD (f32x4.add) kernel for reference,
//                and `new Float32Array(n).fill(1)` per pass (cost of fresh memory)
//   net      (b) `net` loopback throughput, 2 Node processes, sender writes one
//                preallocated 64 MiB Buffer 16x per run (1 GiB); receiver either only
//                counts the chunks or copies each into a preallocated 64 MiB
//                Float32Array (Uint8Array view .set(chunk, off)); copy cost reported
//                separately.  Both TCP 127.0.0.1 and a Unix domain socket.
//   workers  (c) worker_threads postMessage round trip; SharedArrayBuffer +
//                Atomics.wait/notify ping-pong; SAB spin (Atomics.load busy-wait) ping-pong
//   latency  (d) 8-byte TCP ping-pong between 2 Node processes, setNoDelay(true)
//                (plus the same over a Unix domain socket)
//
// Every number is the median over --reps (default 5) repetitions; min-max shown.
// (loops: one repetition = one fresh node process, 3 warmup + 3 timed passes, its median)
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';

const SELF = fileURLToPath(import.meta.url);
const argv = process.argv.slice(2);
const MiB = 1 << 20;
const now = () => Number(process.hrtime.bigint()) / 1e9; // seconds (float)
const median = (v) => {
  const s = [...v].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const stat = (v) => ({ median: median(v), min: Math.min(...v), max: Math.max(...v), n: v.length });

// Quiet gate: the box is shared; before each measurement wait (up to
// --quiet-wait seconds, default 10) until the CPUs are >= 90 % idle over 0.5 s.
// The idle % seen right before the measurement is recorded next to it.
let QUIET_WAIT = 10;
let lastIdle = null;
function cpuSample() {
  const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1, 9).map(Number);
  return { idle: f[3] + f[4], tot: f.reduce((a, b) => a + b, 0) };
}
async function waitQuiet() {
  for (let waited = 0; ; waited += 0.5) {
    const a = cpuSample();
    await new Promise((r) => setTimeout(r, 500));
    const b = cpuSample();
    const pct = (100 * (b.idle - a.idle)) / Math.max(1, b.tot - a.tot);
    if (pct >= 90 || waited >= QUIET_WAIT) {
      lastIdle = pct;
      return pct;
    }
  }
}

// ------------------------------------------------------------------ main
async function main() {
  const opts = Object.fromEntries(
    argv
      .filter((a) => a.startsWith('--'))
      .map((a) => {
        const [k, v] = a.slice(2).split('=');
        return [k, v ?? true];
      }),
  );
  if (opts.merge) {
    // pool the repetitions of earlier --json outputs, print one table
    const runs = String(opts.merge)
      .split(',')
      .map((f) => JSON.parse(fs.readFileSync(f, 'utf8')));
    const byName = new Map();
    for (const run of runs)
      for (const r of run.rows) {
        const m = byName.get(r.name) ?? { ...r, values: [], idles: [] };
        m.values.push(...r.values);
        m.idles.push(r.idleBefore);
        byName.set(r.name, m);
      }
    const rows = [...byName.values()].map((m) => ({ ...m, ...stat(m.values), idleBefore: Math.min(...m.idles) }));
    const e = {
      ...runs[0].env,
      reps: `${runs.length} pooled runs`,
      date: runs.map((r) => r.env.date).join(', '),
      loadavg: runs[0].env.loadavg,
      loadavgEnd: runs[runs.length - 1].env.loadavgEnd,
    };
    printTable({ env: e, rows });
    return;
  }
  const sections = argv.filter((a) => !a.startsWith('--'));
  const want = (s) => sections.length === 0 || sections.includes(s);
  const REPS = Number(opts.reps ?? 5);
  QUIET_WAIT = Number(opts['quiet-wait'] ?? 10);
  const results = {
    env: {
      node: process.version,
      v8: process.versions.v8,
      cpu: os.cpus()[0]?.model,
      cores: os.cpus().length,
      date: new Date().toISOString(),
      loadavg: os.loadavg(),
      reps: REPS,
    },
    rows: [],
  };
  const add = (section, name, unit, values, extra = {}) => {
    const s = stat(values);
    results.rows.push({ section, name, unit, ...s, values, idleBefore: lastIdle, ...extra });
    const f = (x) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
    console.error(`  ${name}: ${f(s.median)} ${unit} (min ${f(s.min)}, max ${f(s.max)}, n=${s.n})`);
  };

  if (want('loops')) await loops(REPS, add);
  if (want('net')) await netThroughput(REPS, add);
  if (want('workers')) await workers(REPS, add);
  if (want('latency')) await pingpong(REPS, add);

  results.env.loadavgEnd = os.loadavg();
  if (opts.json) fs.writeFileSync(opts.json, JSON.stringify(results, null, 1));
  printTable(results);
}

function printTable(results) {
  const e = results.env;
  console.log(`### Node.js floor (${e.node}, V8 ${e.v8}, ${e.cpu}, ${e.cores} cores; median of ${e.reps}; ${e.date})\n`);
  console.log('| section | measurement | median | min–max | unit | n | CPU idle before |');
  console.log('|---|---|---:|---:|---|---:|---:|');
  const f = (x) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x >= 0.1 ? x.toFixed(2) : x.toFixed(3));
  for (const r of results.rows)
    console.log(
      `| ${r.section} | ${r.name} | ${f(r.median)} | ${f(r.min)}–${f(r.max)} | ${r.unit} | ${r.n} | ${r.idleBefore == null ? '' : `${r.idleBefore.toFixed(0)} %`} |`,
    );
  console.log(
    `\n(loadavg start ${e.loadavg.map((x) => x.toFixed(2)).join(' ')}, end ${e.loadavgEnd.map((x) => x.toFixed(2)).join(' ')})`,
  );
}

// ------------------------------------------------------------------ (a) loops
// one function per element type so each stays monomorphic
function addF32(a, b) {
  const n = a.length;
  for (let i = 0; i < n; i++) a[i] += b[i];
}
function addF64(a, b) {
  const n = a.length;
  for (let i = 0; i < n; i++) a[i] += b[i];
}
function addI64(a, b) {
  const n = a.length;
  for (let i = 0; i < n; i++) a[i] += b[i];
}
function add3F32(c, a, b) {
  const n = a.length;
  for (let i = 0; i < n; i++) c[i] = a[i] + b[i];
}

// WebAssembly SIMD reduction kernel, hand-assembled (no toolchain, no deps):
//   export func add(a: i32, b: i32, nbytes: i32): for each 16 B lane group
//   a[..] = f32x4.add(a[..], b[..]), 4x unrolled (nbytes multiple of 64); export mem.
function wasmAddModule() {
  const u = (n) => {
    const o = [];
    do {
      let b = n & 0x7f;
      n >>>= 7;
      if (n) b |= 0x80;
      o.push(b);
    } while (n);
    return o;
  };
  const s = (n) => {
    const o = [];
    for (;;) {
      const b = n & 0x7f;
      n >>= 7;
      if ((n === 0 && !(b & 0x40)) || (n === -1 && b & 0x40)) {
        o.push(b);
        return o;
      }
      o.push(b | 0x80);
    }
  };
  const sec = (id, body) => [id, ...u(body.length), ...body];
  const str = (t) => [...u(t.length), ...Buffer.from(t)];
  const A = 0,
    B = 1,
    N = 2,
    END = 3;
  const get = (i) => [0x20, i],
    set = (i) => [0x21, i];
  const load = (off) => [0xfd, 0x00, 4, ...u(off)],
    store = (off) => [0xfd, 0x0b, 4, ...u(off)];
  const f32x4add = [0xfd, ...u(228)];
  const body = [
    1,
    1,
    0x7f, // 1 local of i32 ($end)
    ...get(A),
    ...get(N),
    0x6a,
    ...set(END),
    0x02,
    0x40,
    0x03,
    0x40,
    ...get(A),
    ...get(END),
    0x4f,
    0x0d,
    1,
  ];
  for (let k = 0; k < 4; k++)
    body.push(...get(A), ...get(A), ...load(16 * k), ...get(B), ...load(16 * k), ...f32x4add, ...store(16 * k));
  body.push(...get(A), 0x41, ...s(64), 0x6a, ...set(A), ...get(B), 0x41, ...s(64), 0x6a, ...set(B), 0x0c, 0, 0x0b, 0x0b, 0x0b);
  const bytes = [
    0x00,
    0x61,
    0x73,
    0x6d,
    1,
    0,
    0,
    0,
    ...sec(1, [1, 0x60, 3, 0x7f, 0x7f, 0x7f, 0]),
    ...sec(3, [1, 0]),
    ...sec(5, [1, 0, 1]),
    ...sec(7, [2, ...str('add'), 0, 0, ...str('mem'), 2, 0]),
    ...sec(10, [1, ...u(body.length), ...body]),
  ];
  return new Uint8Array(bytes);
}

const LOOP_CASES = {
  f32: ['Float32Array a[i]+=b[i]', Float32Array, addF32],
  f64: ['Float64Array a[i]+=b[i]', Float64Array, addF64],
  i64: ['BigInt64Array a[i]+=b[i]', BigInt64Array, addI64],
  f32_3op: ['Float32Array c[i]=a[i]+b[i]', Float32Array, 'add3'],
  f32_set: ['Float32Array c.set(b) (copy)', Float32Array, 'copy'],
  wasm: ['WebAssembly SIMD f32x4 a[i]+=b[i] (wasm memory)', Float32Array, 'wasm'],
  f32_alloc: ['new Float32Array(n).fill(1) (fresh allocation per pass)', Float32Array, 'alloc'],
};

// Runs in a fresh process per (kernel, size, repetition): JIT state of one
// case cannot pollute another, and the process-to-process variation seen on
// this VM (same code: 1.8 vs 2.8 GB/s in different processes) is sampled.
// Returns the median GB/s of PASSES timed passes (after 3 warmup passes).
const PASSES = 3;
async function loopCase(key, bytes) {
  const [name, T, fn] = LOOP_CASES[key];
  const inner = Math.max(1, Math.floor((64 * MiB) / bytes)); // >= 64 MiB of work per timing
  const n = bytes / T.BYTES_PER_ELEMENT;
  const isBig = T === BigInt64Array;
  let a, b, c, run;
  if (fn === 'wasm') {
    const { instance } = await WebAssembly.instantiate(wasmAddModule());
    const { add: wadd, mem } = instance.exports;
    mem.grow(Math.ceil((2 * bytes) / 65536));
    a = new Float32Array(mem.buffer, 65536, n);
    b = new Float32Array(mem.buffer, 65536 + bytes, n);
    run = () => wadd(65536, 65536 + bytes, bytes);
  } else {
    a = new T(n);
    b = new T(n);
    c = new T(n);
    run =
      fn === 'copy'
        ? () => c.set(b)
        : fn === 'add3'
          ? () => add3F32(c, a, b)
          : fn === 'alloc'
            ? () => {
                c = new T(n);
                c.fill(1);
              }
            : () => fn(a, b);
  }
  for (let i = 0; i < n; i++) b[i] = isBig ? BigInt(i & 15) : i & 15;
  for (let w = 0; w < 3; w++) run(); // warmup (JIT tier-up)
  const v = [];
  for (let r = 0; r < PASSES; r++) {
    const t0 = now();
    for (let k = 0; k < inner; k++) run();
    v.push((bytes * inner) / (now() - t0) / 1e9);
  }
  // correctness: a == passes * b (exact small integers) for the += kernels
  if (typeof fn === 'function' || fn === 'wasm') {
    const passes = 3 + PASSES * inner;
    for (const i of [0, 1, 15, n >> 1, n - 1]) {
      const want = isBig ? BigInt(passes) * b[i] : passes * b[i];
      if (a[i] !== want) throw new Error(`${name}: wrong result at ${i}: ${a[i]} != ${want}`);
    }
  }
  return v;
}

async function loops(REPS, add) {
  console.error('(a) JS typed-array loops (every repetition in a fresh node process)');
  for (const bytes of [64 * MiB, 1 * MiB]) {
    const label = `${bytes / MiB} MiB`;
    for (const key of Object.keys(LOOP_CASES)) {
      await waitQuiet();
      const out = [];
      for (let r = 0; r < REPS; r++) {
        out.push(
          await new Promise((resolve, reject) => {
            const ch = spawn(process.execPath, [SELF, '--role=loop', key, String(bytes)], {
              stdio: ['ignore', 'pipe', 'inherit'],
            });
            let txt = '';
            ch.stdout.on('data', (d) => (txt += d));
            ch.on('exit', (code) =>
              code === 0 ? resolve(median(JSON.parse(txt))) : reject(new Error(`loop ${key} exit ${code}`)),
            );
          }),
        );
      }
      add('loops', `${LOOP_CASES[key][0]}, ${label}`, 'GB/s', out);
    }
  }
}

// ------------------------------------------------------------------ (b) net throughput
async function netThroughput(REPS, add) {
  console.error('(b) net loopback throughput (1 GiB per run, 64 MiB writes)');
  const CHUNK = 64 * MiB,
    TOTAL = 16 * CHUNK;
  const dst = new Float32Array(CHUNK / 4);
  dst.fill(1); // touch pages
  const dstU8 = new Uint8Array(dst.buffer);
  for (const transport of ['tcp', 'unix']) {
    for (const mode of ['count', 'copy']) {
      const gbps = [],
        copyGbps = [],
        chunkKiB = [];
      await waitQuiet();
      for (let r = 0; r < REPS + 1; r++) {
        // first run = warmup, discarded
        const res = await oneTransfer(transport, mode, TOTAL, CHUNK, dstU8);
        if (r === 0) continue;
        gbps.push(TOTAL / res.secs / 1e9);
        if (mode === 'copy') copyGbps.push(TOTAL / res.copySecs / 1e9);
        chunkKiB.push(TOTAL / res.chunks / 1024);
      }
      const tn = transport === 'tcp' ? 'TCP 127.0.0.1' : 'Unix socket';
      add('net', `${tn}, receiver ${mode === 'count' ? 'only counts chunks' : 'copies chunks into Float32Array'}`, 'GB/s', gbps, {
        meanChunkKiB: median(chunkKiB),
      });
      if (mode === 'copy') {
        add('net', `${tn}, the copy alone (Uint8Array.set of received chunks)`, 'GB/s', copyGbps);
        add('net', `${tn}, mean received chunk size`, 'KiB', chunkKiB);
      }
    }
  }
}

function oneTransfer(transport, mode, total, chunk, dstU8) {
  return new Promise((resolve, reject) => {
    const addr = transport === 'tcp' ? null : `/tmp/node-floor-${process.pid}.sock`;
    if (addr)
      try {
        fs.unlinkSync(addr);
      } catch {}
    let got = 0,
      chunks = 0,
      t0 = 0,
      copySecs = 0,
      off = 0;
    const cap = dstU8.length;
    const srv = net.createServer((s) => {
      s.on('data', (d) => {
        if (got === 0) t0 = now();
        got += d.length;
        chunks++;
        if (mode === 'copy') {
          const c0 = now();
          let p = 0;
          while (p < d.length) {
            // wrap around the 64 MiB destination
            const k = Math.min(d.length - p, cap - off);
            dstU8.set(p === 0 && k === d.length ? d : d.subarray(p, p + k), off);
            off = (off + k) % cap;
            p += k;
          }
          copySecs += now() - c0;
        }
        if (got >= total) {
          const secs = now() - t0;
          s.destroy();
          srv.close();
          resolve({ secs, copySecs, chunks });
        }
      });
      s.on('error', reject);
    });
    const go = () => {
      const a = addr ?? String(srv.address().port);
      const child = spawn(process.execPath, [SELF, '--role=sender', a, String(total), String(chunk)], { stdio: 'inherit' });
      child.on('error', reject);
    };
    if (addr) srv.listen(addr, go);
    else srv.listen(0, '127.0.0.1', go);
  });
}

// ------------------------------------------------------------------ (c) worker threads
async function workers(REPS, add) {
  console.error('(c) worker_threads');
  // postMessage round trip
  {
    await waitQuiet();
    const w = new Worker(SELF, { workerData: { mode: 'post' } });
    await new Promise((r) => w.once('online', r));
    const rt = (n) =>
      new Promise((resolve) => {
        let i = 0;
        const t0 = now();
        const on = () => {
          if (++i === n) {
            w.off('message', on);
            resolve((now() - t0) / n);
          } else w.postMessage(i);
        };
        w.on('message', on);
        w.postMessage(0);
      });
    await rt(2000); // warmup
    const v = [];
    for (let r = 0; r < REPS; r++) v.push((await rt(20000)) * 1e6);
    add('workers', 'postMessage round trip (main <-> worker, small number)', 'µs', v);
    await w.terminate();
  }
  // SAB ping-pong: Atomics.wait/notify and spin
  for (const mode of ['wait', 'spin']) {
    const v = [];
    await waitQuiet();
    for (let r = 0; r < REPS + 1; r++) {
      // up to N round trips, but stop after ~1 s (a descheduled spinner can make
      // each round trip cost a whole time slice on a busy 2-core box)
      const N = 200000;
      const sab = new SharedArrayBuffer(8);
      const ping = new Int32Array(sab, 0, 1),
        pong = new Int32Array(sab, 4, 1);
      const w = new Worker(SELF, { workerData: { mode, sab, n: N } });
      await new Promise((res) => w.once('online', res));
      const t0 = now();
      let done = 0;
      for (let seq = 1; seq <= N; seq++) {
        Atomics.store(ping, 0, seq);
        if (mode === 'wait') {
          Atomics.notify(ping, 0);
          while (Atomics.load(pong, 0) !== seq) Atomics.wait(pong, 0, seq - 1);
        } else {
          while (Atomics.load(pong, 0) !== seq);
        }
        done = seq;
        if ((seq & 1023) === 0 && now() - t0 > 1) break;
      }
      const dt = (now() - t0) / done;
      if (done < N) {
        Atomics.store(ping, 0, -1);
        Atomics.notify(ping, 0);
      } // tell worker to stop
      await new Promise((res) => w.once('message', res));
      await w.terminate();
      if (r > 0) v.push(dt * 1e6); // first run = warmup
    }
    add(
      'workers',
      mode === 'wait'
        ? 'SharedArrayBuffer + Atomics.wait/notify ping-pong round trip'
        : 'SharedArrayBuffer spin (Atomics.load busy-wait) ping-pong round trip',
      'µs',
      v,
    );
  }
}

// ------------------------------------------------------------------ (d) ping-pong latency
async function pingpong(REPS, add) {
  console.error('(d) 8-byte ping-pong between two processes, setNoDelay(true)');
  for (const transport of ['tcp', 'unix']) {
    const addrArg = transport === 'tcp' ? 'tcp' : `/tmp/node-floor-echo-${process.pid}.sock`;
    const child = spawn(process.execPath, [SELF, '--role=echo', addrArg], { stdio: ['pipe', 'pipe', 'inherit'] });
    const addr = await new Promise((res) => child.stdout.once('data', (d) => res(d.toString().trim())));
    const sock = await new Promise((res) => {
      const s =
        transport === 'tcp'
          ? net.connect({ host: '127.0.0.1', port: Number(addr) }, () => res(s))
          : net.connect({ path: addr }, () => res(s));
    });
    sock.setNoDelay(true);
    await waitQuiet();
    const msg = Buffer.alloc(8, 1);
    const rounds = (n) =>
      new Promise((resolve) => {
        let i = 0,
          have = 0;
        const t0 = now();
        const on = (d) => {
          have += d.length;
          while (have >= 8) {
            have -= 8;
            if (++i === n) {
              sock.off('data', on);
              resolve((now() - t0) / n);
              return;
            }
            sock.write(msg);
          }
        };
        sock.on('data', on);
        sock.write(msg);
      });
    await rounds(2000); // warmup
    const v = [];
    for (let r = 0; r < REPS; r++) v.push((await rounds(20000)) * 1e6);
    const tn = transport === 'tcp' ? 'TCP 127.0.0.1' : 'Unix socket';
    add('latency', `${tn} 8 B ping-pong round trip`, 'µs', v);
    add(
      'latency',
      `${tn} 8 B one-way (round trip / 2, OSU-style)`,
      'µs',
      v.map((x) => x / 2),
    );
    sock.destroy();
    child.stdin.end();
    await new Promise((res) => child.once('exit', res));
  }
}

// ------------------------------------------------------------------ child roles
// (dispatched at the end of the module, after all declarations are initialised)
if (isMainThread && argv[0] === '--role=sender') {
  // connect to addr, write `total` bytes as repeated writes of one `chunk`-byte Buffer
  const [addr, total, chunk] = [argv[1], Number(argv[2]), Number(argv[3])];
  const buf = Buffer.alloc(chunk, 7);
  const opts = addr.startsWith('/') ? { path: addr } : { host: '127.0.0.1', port: Number(addr) };
  const sock = net.connect(opts, () => {
    sock.setNoDelay(true);
    let sent = 0;
    const pump = () => {
      while (sent < total) {
        sent += chunk;
        if (!sock.write(buf)) return sock.once('drain', pump);
      }
      sock.end();
    };
    pump();
  });
  sock.on('error', (e) => {
    console.error('sender', e);
    process.exit(1);
  });
} else if (isMainThread && argv[0] === '--role=loop') {
  const v = await loopCase(argv[1], Number(argv[2]));
  process.stdout.write(JSON.stringify(v));
} else if (isMainThread && argv[0] === '--role=echo') {
  // echo server for the ping-pong; prints its address on stdout
  const addr = argv[1];
  const srv = net.createServer((s) => {
    s.setNoDelay(true);
    s.on('data', (d) => s.write(d));
    s.on('error', () => {});
  });
  const cb = () => process.stdout.write(`${String(addr === 'tcp' ? srv.address().port : addr)}\n`);
  if (addr === 'tcp') srv.listen(0, '127.0.0.1', cb);
  else {
    try {
      fs.unlinkSync(addr);
    } catch {}
    srv.listen(addr, cb);
  }
  process.stdin.on('end', () => process.exit(0));
  process.stdin.resume();
} else if (!isMainThread) {
  // ------------------------------------------------------------ worker thread roles
  const { mode, sab, n } = workerData;
  if (mode === 'post') {
    parentPort.on('message', (m) => parentPort.postMessage(m));
  } else {
    const ping = new Int32Array(sab, 0, 1),
      pong = new Int32Array(sab, 4, 1);
    for (let seq = 1; seq <= n; seq++) {
      let x = Atomics.load(ping, 0);
      while (x !== seq && x !== -1) {
        if (mode === 'wait') Atomics.wait(ping, 0, x);
        x = Atomics.load(ping, 0);
      }
      if (x === -1) break; // main stopped early
      Atomics.store(pong, 0, seq);
      if (mode === 'wait') Atomics.notify(pong, 0);
    }
    parentPort.postMessage('done');
  }
} else {
  await main();
}
