// The ringreduce dashboard page: polls /api/state once a second and draws the ranks' table, the
// charts (uPlot, shipped with the page) and the events. Read-only: it only ever GETs. Data from
// the ranks is put in the page as text, never as markup.
(() => {
  const kPollMs = 1000;
  const kMaxPoints = 600;
  const kPalette = ['#2b6cb0', '#c05621', '#2f855a', '#b83280', '#6b46c1', '#b7791f', '#00838f', '#9b2c2c'];
  const token = new URLSearchParams(location.search).get('token') ?? '';
  const $ = (id) => document.getElementById(id);

  /** Chart columns: time, then one array per series. */
  const data = { t: [], collectives: [], busbw: [], sent: [], received: [], loss: [], accuracy: [], samples: [] };
  const charts = {};
  let lastT = 0;
  let size = 0;
  let over = false;
  let polls = 0;
  /** For tests and the curious: the charts and how many polls answered. */
  window.__ringreduce = { charts, data, polls: () => polls };

  function bytesPerSec(value) {
    if (!(value > 0)) return '0 B/s';
    const units = ['B/s', 'KB/s', 'MB/s', 'GB/s'];
    let v = value;
    let u = 0;
    while (v >= 1000 && u < units.length - 1) {
      v /= 1000;
      u++;
    }
    return `${v >= 100 ? v.toFixed(0) : v.toFixed(1)} ${units[u]}`;
  }

  function seconds(ms) {
    return ms >= 10_000 ? `${Math.round(ms / 1000)} s` : `${(ms / 1000).toFixed(1)} s`;
  }

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function width(id) {
    return Math.max(300, $(id).clientWidth || 420);
  }

  function makeChart(id, series, columns, axes) {
    const options = {
      width: width(id),
      height: 180,
      legend: { live: false },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true } },
      series: [{}, ...series],
      axes: axes ?? [{}, { size: 60 }],
    };
    charts[id] = new uPlot(options, columns(), $(id));
    charts[id].columns = columns;
  }

  function perRankSeries(label) {
    return Array.from({ length: size }, (_, r) => ({
      label: `${label} ${r}`,
      stroke: kPalette[r % kPalette.length],
      width: 1.5,
      value: (_u, v) => (v == null ? '-' : v.toFixed(2)),
    }));
  }

  function ensureCharts() {
    if (charts['chart-collectives']) return;
    makeChart(
      'chart-collectives',
      [{ label: 'collectives/s', stroke: '#2b6cb0', fill: 'rgba(43,108,176,0.12)', width: 1.5 }],
      () => [data.t, data.collectives],
    );
    makeChart('chart-busbw', [{ label: 'MB/s', stroke: '#2f855a', fill: 'rgba(47,133,90,0.12)', width: 1.5 }], () => [
      data.t,
      data.busbw,
    ]);
    makeChart('chart-sent', perRankSeries('rank'), () => [data.t, ...data.sent]);
    makeChart('chart-received', perRankSeries('rank'), () => [data.t, ...data.received]);
    makeChart(
      'chart-loss',
      [
        { label: 'loss', stroke: '#c05621', width: 1.5, scale: 'loss' },
        { label: 'accuracy', stroke: '#2b6cb0', width: 1.5, scale: 'acc' },
      ],
      () => [data.t, data.loss, data.accuracy],
      [{}, { scale: 'loss', size: 50 }, { scale: 'acc', side: 1, size: 50, grid: { show: false } }],
    );
    makeChart('chart-samples', [{ label: 'samples/s', stroke: '#6b46c1', fill: 'rgba(107,70,193,0.12)', width: 1.5 }], () => [
      data.t,
      data.samples,
    ]);
  }

  function addPoints(points) {
    for (const p of points) {
      data.t.push(p.t);
      data.collectives.push(p.collectivesPerSec);
      data.busbw.push(p.busBytesPerSec / 1e6);
      for (let r = 0; r < size; r++) {
        data.sent[r].push((p.sentPerSec[r] ?? 0) / 1e6);
        data.received[r].push((p.receivedPerSec[r] ?? 0) / 1e6);
      }
      data.loss.push(p.loss);
      data.accuracy.push(p.accuracy);
      data.samples.push(p.samplesPerSec);
      lastT = p.t;
    }
    const extra = data.t.length - kMaxPoints;
    if (extra > 0) {
      for (const key of ['t', 'collectives', 'busbw', 'loss', 'accuracy', 'samples']) data[key].splice(0, extra);
      for (let r = 0; r < size; r++) {
        data.sent[r].splice(0, extra);
        data.received[r].splice(0, extra);
      }
    }
    for (const chart of Object.values(charts)) chart.setData(chart.columns());
    const training = data.loss.some((v) => v != null) || data.samples.some((v) => v != null);
    for (const figure of document.querySelectorAll('.training-chart')) figure.classList.toggle('hidden', !training);
  }

  function renderRanks(ranks) {
    const body = $('ranks').tBodies[0];
    body.replaceChildren(
      ...ranks.map((r) => {
        const row = el('tr', `r-${r.state}`);
        row.dataset.rank = String(r.rank);
        const state = el('td');
        state.append(el('span', `state s-${r.state}`, r.state));
        if (r.exit) state.append(el('div', 'muted', r.exit));
        const pending = el('td', 'pending');
        for (const p of r.pending.slice(0, 3)) pending.append(el('div', '', `${p.name} (${p.op}) ${seconds(p.waitedMs)}`));
        if (r.pendingCount > 3) pending.append(el('div', 'muted', `+${r.pendingCount - 3} more`));
        row.append(
          el('td', 'num', String(r.rank)),
          el('td', '', r.host ?? '-'),
          el('td', 'num pid', r.pid == null ? '-' : String(r.pid)),
          state,
          el('td', 'num completed', String(r.completed)),
          el('td', 'num', r.collectivesPerSec.toFixed(1)),
          el('td', 'num', bytesPerSec(r.sentPerSec)),
          el('td', 'num', bytesPerSec(r.receivedPerSec)),
          pending,
          el('td', 'error', r.lastError ?? ''),
        );
        return row;
      }),
    );
  }

  function renderTraining(training) {
    const box = $('training');
    box.classList.toggle('hidden', !training);
    if (!training) return;
    const parts = [];
    const epoch = training.epochs ? `epoch ${training.epoch + 1}/${training.epochs}` : `epoch ${training.epoch + 1}`;
    parts.push(el('strong', '', epoch));
    if (training.batches && training.batch >= 0) {
      const bar = el('span', 'bar');
      const fill = el('span');
      fill.style.width = `${Math.min(100, ((training.batch + 1) / training.batches) * 100).toFixed(1)}%`;
      bar.append(fill);
      parts.push(bar, el('span', 'muted', `batch ${training.batch + 1}/${training.batches}`));
    }
    for (const [key, value] of Object.entries(training.logs)) parts.push(el('span', '', `  ${key} ${Number(value).toFixed(4)}`));
    box.replaceChildren(...parts);
  }

  function renderEvents(events) {
    if (events.length === 0) {
      $('events').replaceChildren(el('li', 'none', 'no warnings or errors so far'));
      return;
    }
    $('events').replaceChildren(
      ...events
        .slice()
        .reverse()
        .map((e) => {
          const time = new Date(e.t).toLocaleTimeString();
          const who = e.rank == null ? 'ringrun' : `rank ${e.rank}`;
          return el('li', `e-${e.level}`, `${time}  ${who}: ${e.text}`);
        }),
    );
  }

  function render(state) {
    const job = state.job;
    if (size === 0) {
      size = job.size;
      data.sent = Array.from({ length: size }, () => []);
      data.received = Array.from({ length: size }, () => []);
      $('command').textContent = job.command;
      document.title = `ringreduce: ${job.command}`;
      ensureCharts();
    }
    const failed = state.ranks.some((r) => r.state === 'failed') || (job.exitCode != null && job.exitCode !== 0);
    const jobState = job.exitCode != null ? (job.exitCode === 0 ? 'finished' : 'failed') : failed ? 'failed' : 'running';
    $('job-state').textContent = job.exitCode != null ? `${jobState} (exit ${job.exitCode})` : jobState;
    $('job-state').className = `badge s-${jobState}`;
    $('elapsed').textContent = seconds(job.now - job.startedAt);
    const link = $('timeline');
    link.classList.toggle('hidden', !job.timeline);
    link.href = `/api/timeline?token=${encodeURIComponent(token)}`;
    $('failure').classList.toggle('hidden', !state.failureReport);
    $('failure-report').textContent = (state.failureReport ?? []).join('\n');
    over = job.exitCode != null;
    renderRanks(state.ranks);
    renderTraining(state.training);
    renderEvents(state.events);
  }

  async function poll() {
    try {
      const response = await fetch(`/api/state?token=${encodeURIComponent(token)}&since=${lastT}`, { cache: 'no-store' });
      if (response.status === 403) {
        $('job-state').textContent = 'wrong or missing token: open the URL ringrun printed';
        $('job-state').className = 'badge s-failed';
        return;
      }
      const { state, series } = await response.json();
      polls++;
      render(state);
      addPoints(series);
    } catch {
      // ringrun has exited (or is unreachable): keep the last state on screen.
      if (over || size > 0) $('elapsed').textContent = 'ringrun has exited: this is the last state it served';
    }
    setTimeout(poll, kPollMs);
  }

  window.addEventListener('resize', () => {
    for (const [id, chart] of Object.entries(charts)) chart.setSize({ width: width(id), height: 180 });
  });
  poll();
})();
