/**
 * `ringrun --headless`: ringrun opens the browser ranks' tabs itself, in a headless Chromium it
 * starts (puppeteer-core, which downloads no browser: `CHROME_PATH`, else `chromium`,
 * `chromium-browser`, `google-chrome` on the PATH). One browser, one tab per rank, a fresh
 * profile that is removed at the end; closed when the job ends, so no tab outlives it.
 *
 * The flags: no sandbox when running as root (Chromium refuses to start otherwise), no GPU, and
 * none of Chromium's background connections (updates, sync, field trials), which a closed
 * network refuses by the hundred.
 */
import { accessSync, constants, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { InvalidArgumentError } from '../../core/errors.js';
import type { ProcessGuard } from '../orphan_guard.js';

const kCandidates = ['chromium', 'chromium-browser', 'google-chrome', 'google-chrome-stable'];
/** Chromium's flags for ringrun's tabs (bench/browser_links.ts opens its raw probes' tabs with them too). */
export const kHeadlessFlags: readonly string[] = [
  '--disable-gpu',
  '--no-first-run',
  '--no-default-browser-check',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-quic',
  '--disable-features=Translate,OptimizationHints,MediaRouter',
  // Tabs in the background must not be throttled: the ranks' workers are not, but their pages'
  // timers are, and each tab is a rank.
  '--disable-background-timer-throttling',
  '--disable-renderer-backgrounding',
  '--disable-backgrounding-occluded-windows',
];

export interface HeadlessBrowser {
  /** Closes every tab and the browser, and removes its profile. Idempotent. */
  close(): Promise<void>;
}

/** Where Chromium is: CHROME_PATH, else the first of kCandidates on PATH. */
export function findChromium(env: Readonly<Record<string, string | undefined>>): string {
  const given = env.CHROME_PATH;
  if (given) return given;
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    for (const name of kCandidates) {
      const path = join(dir, name);
      try {
        accessSync(path, constants.X_OK);
        return path;
      } catch {}
    }
  }
  throw new InvalidArgumentError(
    `--headless needs Chromium: none of ${kCandidates.join(', ')} is on the PATH (install it, e.g. apt-get install chromium, or set CHROME_PATH)`,
  );
}

/** Profiles are `ringrun-chromium-<ringrun's pid>-<random>` in the temporary directory. */
const kProfilePrefix = 'ringrun-chromium-';
const kProfileName = new RegExp(`^${kProfilePrefix}(\\d+)-`);

/**
 * Removes the profiles of ringruns that are gone without removing theirs (killed outright: the
 * orphan guard stops their Chromium but cannot clean up after it). A profile whose ringrun's pid
 * runs (that ringrun, or a process that reused its pid) is left alone.
 */
export function removeStaleProfiles(dir: string = tmpdir()): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    const pid = kProfileName.exec(name)?.[1];
    if (pid === undefined || Number(pid) === process.pid || running(Number(pid))) continue;
    rmSync(join(dir, name), { recursive: true, force: true });
    removed.push(name);
  }
  return removed;
}

function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'; // someone else's process
  }
}

/**
 * Starts Chromium and opens `count` tabs on `url`. Chromium leads a process group of its own
 * (puppeteer starts it detached), which `guard` stops should ringrun die without closing it.
 */
export async function openHeadless(
  url: string,
  count: number,
  env: Readonly<Record<string, string | undefined>>,
  log: (message: string) => void,
  guard?: ProcessGuard,
): Promise<HeadlessBrowser> {
  const executablePath = findChromium(env);
  let launch: typeof import('puppeteer-core')['launch'];
  try {
    ({ launch } = await import('puppeteer-core'));
  } catch {
    throw new InvalidArgumentError('--headless needs the puppeteer-core package: npm install puppeteer-core');
  }
  removeStaleProfiles();
  const profile = mkdtempSync(join(tmpdir(), `${kProfilePrefix}${process.pid}-`));
  const runningAsRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const browser = await launch({
    executablePath,
    headless: true,
    userDataDir: profile,
    args: [...kHeadlessFlags, ...(runningAsRoot ? ['--no-sandbox'] : [])],
    handleSIGINT: false,
    handleSIGTERM: false,
    handleSIGHUP: false,
  });
  const pid = browser.process()?.pid;
  if (pid !== undefined) guard?.watch(pid, 'headless Chromium');
  let closed = false;
  const closeBrowser = async () => {
    await browser.close().catch(() => {});
    if (pid !== undefined) guard?.unwatch(pid);
    rmSync(profile, { recursive: true, force: true });
  };
  browser.on('disconnected', () => {
    if (!closed) log('the headless browser went away');
  });
  try {
    for (let i = 0; i < count; i++) {
      const page = await browser.newPage();
      page.on('pageerror', (error) => log(`a browser rank's page: ${(error as Error).message}`));
      await page.goto(url, { waitUntil: 'domcontentloaded' });
    }
  } catch (error) {
    await closeBrowser();
    throw error;
  }
  return {
    close: async () => {
      if (closed) return;
      closed = true;
      await closeBrowser();
    },
  };
}
