/**
 * The dashboard in a real browser: Debian's chromium, headless, driven by puppeteer-core, against
 * a real 3-rank job started with `ringrun --dashboard`. The page lists the 3 ranks, its
 * collectives counter grows between two reads, the charts draw points (on the canvas, not only
 * in their data), and when a rank is SIGKILLed (its pid read from the page) the page shows it
 * failed, with the failure report ringrun prints. Screenshots are kept in a temp folder (the
 * test says where). Skipped, saying why, where chromium is not installed (.ci/run installs it).
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { it } from 'node:test';
import { fileURLToPath } from 'node:url';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { cleanEnv, RingrunRun } from './fixtures/ringrun_harness.js';

const kChromium = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const kJob = fileURLToPath(new URL('./fixtures/dashboard_job.js', import.meta.url));
/** As root, in a closed network: the flags this machine's notes give for headless chromium. */
const kFlags = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

const skip = existsSync(kChromium) ? false : `no chromium at ${kChromium} (apt-get install chromium; CHROMIUM_PATH)`;

/** The sum of the numbers in the cells `selector` picks. */
async function sumOf(page: Page, selector: string): Promise<number> {
  return page.$$eval(selector, (cells) => cells.reduce((sum, cell) => sum + Number(cell.textContent), 0));
}

// What runs in the page is given as text: this project compiles without the DOM's types.
const kThreeRows = "document.querySelectorAll('#ranks tbody tr').length === 3";
const kAllRunning = "[...document.querySelectorAll('#ranks tbody .state')].every((cell) => cell.textContent === 'running')";
const kChartHasPoints = `(() => {
  const chart = window.__ringreduce.charts['chart-collectives'];
  return chart !== undefined && (chart.data[1] ?? []).filter((v) => v > 0).length >= 2;
})()`;
/** Pixels of the collectives series' stroke (#2b6cb0, allowing for antialiasing) on its canvas. */
const kStrokedPixels = `(() => {
  const canvas = document.querySelector('#chart-collectives canvas');
  const pixels = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  let count = 0;
  for (let i = 0; i < pixels.length; i += 4) {
    if (Math.abs(pixels[i] - 43) < 40 && Math.abs(pixels[i + 1] - 108) < 40 && pixels[i + 2] > 140) count++;
  }
  return count;
})()`;
const kRank1Failed = "document.querySelector('#ranks tbody tr[data-rank=\"1\"] .state')?.textContent === 'failed'";
const kReportShown =
  "/job failed: rank 1 \\(pid \\d+\\) was killed by SIGKILL/.test(document.querySelector('#failure-report')?.textContent ?? '')";

it('the page of a live 3-rank job: ranks, growing counters, drawn charts, a SIGKILLed rank shown failed', {
  skip,
  timeout: 90_000,
}, async (t) => {
  const shots = mkdtempSync(join(tmpdir(), 'ringreduce-dashboard-shots-'));
  const profile = mkdtempSync(join(tmpdir(), 'ringreduce-chromium-'));
  t.diagnostic(`screenshots in ${shots}`);
  const run = new RingrunRun(['--dashboard', '-np', '3', process.execPath, kJob, '--seconds', '60'], cleanEnv(), 80_000);
  let browser: Browser | undefined;
  try {
    await run.waitFor('the dashboard URL', (r) => /dashboard: http:\/\/\S+/.test(r.stderr));
    const url = (/dashboard: (http:\/\/\S+)/.exec(run.stderr) as RegExpExecArray)[1] as string;
    browser = await puppeteer.launch({
      executablePath: kChromium,
      headless: true,
      userDataDir: profile,
      args: kFlags,
    });
    const page = await browser.newPage();
    await page.setViewport({ width: 1400, height: 1000 });
    await page.goto(url, { waitUntil: 'load' });

    await page.waitForFunction(kThreeRows, { timeout: 20_000 });
    await page.waitForFunction(kAllRunning, { timeout: 20_000 });
    const first = await sumOf(page, '#ranks tbody .completed');
    await new Promise((resolve) => setTimeout(resolve, 2500));
    const second = await sumOf(page, '#ranks tbody .completed');
    assert.ok(second > first, `the collectives counter grows: ${first} then ${second}`);

    // Points in the chart's data, and the series' colour on its canvas.
    await page.waitForFunction(kChartHasPoints, { timeout: 20_000 });
    const stroked = (await page.evaluate(kStrokedPixels)) as number;
    assert.ok(stroked > 20, `the collectives chart has a drawn line (${stroked} pixels of its colour)`);
    await page.screenshot({ path: join(shots, 'running.png'), fullPage: true });

    const pid = Number(await page.$eval('#ranks tbody tr[data-rank="1"] .pid', (cell) => cell.textContent));
    assert.ok(pid > 0, "the page shows rank 1's pid");
    process.kill(pid, 'SIGKILL');
    await page.waitForFunction(kRank1Failed, { timeout: 15_000 });
    await page.waitForFunction(kReportShown, { timeout: 20_000 });
    const report = await page.$eval('#failure-report', (pre) => pre.textContent ?? '');
    assert.equal(await page.$eval('#failure', (section) => section.className), 'failure', 'the failure report is shown');
    assert.match(run.stderr, /ringrun: job failed: rank 1 \(pid \d+\) was killed by SIGKILL/);
    assert.ok(run.stderr.includes(report.split('\n')[0] as string), 'the page shows the report ringrun printed');
    await page.screenshot({ path: join(shots, 'failed.png'), fullPage: true });
    const result = await run.finished;
    assert.equal(result.code, 137, result.stderr);
  } finally {
    await browser?.close();
    run.child.kill('SIGKILL');
    rmSync(profile, { recursive: true, force: true });
  }
});
