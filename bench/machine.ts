/** What the machine was doing around a run: benchmarks on a shared box report it next to figures. */
import { readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';

function cpuTimes(): { idle: number; total: number } {
  const fields = (readFileSync('/proc/stat', 'utf8').split('\n')[0] as string).trim().split(/\s+/).slice(1, 9).map(Number);
  return { idle: (fields[3] ?? 0) + (fields[4] ?? 0), total: fields.reduce((a, b) => a + b, 0) };
}

/** Percent of CPU time idle over `ms` (all cores); null where /proc/stat is missing. */
export async function idlePercent(ms = 500): Promise<number | null> {
  try {
    const a = cpuTimes();
    await new Promise((resolve) => setTimeout(resolve, ms));
    const b = cpuTimes();
    return Math.round((100 * (b.idle - a.idle)) / Math.max(1, b.total - a.total));
  } catch {
    return null;
  }
}

export function machineLine(idle: number | null): string {
  const load = loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
  return `${cpus().length} cores (${cpus()[0]?.model ?? '?'}), Node ${process.version}, load ${load}, CPU idle before ${idle ?? '?'}%`;
}
