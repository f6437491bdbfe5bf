/**
 * `npm run bench -- --plot FILE.svg`: the bench's figures as a picture, an SVG written directly
 * (no library): bus bandwidth (left) and time per call (right) against message size, both on
 * log scales, one line per series; the peers' lines (OpenMPI, Gloo: plot_peers.ts) dashed.
 */

export interface PlotPoint {
  bytes: number;
  /** Mean time per call, µs. */
  timeUs: number;
  busbwGBs: number;
}

export interface PlotSeries {
  label: string;
  points: PlotPoint[];
  /** A peer's figures: drawn dashed. */
  peer?: boolean;
}

const kWidth = 1100;
const kHeight = 490;
const kPanel = { width: 460, height: 300, top: 70, left: [80, 620] as const };
const kColors = ['#2b6cb0', '#c05621', '#2f855a', '#b83280', '#6b46c1', '#b7791f', '#00838f', '#9b2c2c'];

function escapeXml(text: string): string {
  return text.replace(/[<>&"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

export function formatBytes(bytes: number): string {
  if (bytes >= 1 << 30) return `${+(bytes / (1 << 30)).toFixed(1)}G`;
  if (bytes >= 1 << 20) return `${+(bytes / (1 << 20)).toFixed(1)}M`;
  if (bytes >= 1024) return `${+(bytes / 1024).toFixed(1)}K`;
  return `${bytes}`;
}

function formatValue(value: number): string {
  if (value >= 1000) return `${+(value / 1000).toPrecision(3)}k`;
  if (value >= 1) return `${+value.toPrecision(3)}`;
  if (value < 0.001) return `1e${Math.round(Math.log10(value))}`;
  return `${+value.toPrecision(2)}`;
}

/** Decades covering [lo, hi] (positive values), at least one. */
function decades(lo: number, hi: number): [number, number] {
  const a = Math.floor(Math.log10(lo));
  const b = Math.max(a + 1, Math.ceil(Math.log10(hi)));
  return [a, b];
}

interface Axis {
  x: (bytes: number) => number;
  y: (value: number) => number;
}

function panel(
  left: number,
  title: string,
  unit: string,
  series: readonly PlotSeries[],
  value: (p: PlotPoint) => number,
  bytesRange: [number, number],
): string {
  const { width, height, top } = kPanel;
  const values = series.flatMap((s) => s.points.map(value)).filter((v) => v > 0);
  const [ya, yb] = decades(Math.min(...values), Math.max(...values));
  const [xa, xb] = [Math.log2(bytesRange[0]), Math.max(Math.log2(bytesRange[1]), Math.log2(bytesRange[0]) + 1)];
  const axis: Axis = {
    x: (bytes) => left + ((Math.log2(bytes) - xa) / (xb - xa)) * width,
    y: (v) => top + height - ((Math.log10(v) - ya) / (yb - ya)) * height,
  };
  const parts: string[] = [];
  parts.push(`<text x="${left + width / 2}" y="${top - 18}" class="title">${escapeXml(title)}</text>`);
  parts.push(`<rect x="${left}" y="${top}" width="${width}" height="${height}" class="frame"/>`);
  for (let d = ya; d <= yb; d++) {
    const y = axis.y(10 ** d);
    parts.push(`<line x1="${left}" x2="${left + width}" y1="${y}" y2="${y}" class="grid"/>`);
    parts.push(`<text x="${left - 8}" y="${y + 4}" class="ytick">${formatValue(10 ** d)}</text>`);
  }
  const step = Math.max(2, Math.ceil((xb - xa) / 8 / 2) * 2);
  for (let e = Math.ceil(xa); e <= xb; e += step) {
    const x = axis.x(2 ** e);
    parts.push(`<line x1="${x}" x2="${x}" y1="${top}" y2="${top + height}" class="grid"/>`);
    parts.push(`<text x="${x}" y="${top + height + 18}" class="xtick">${formatBytes(2 ** e)}</text>`);
  }
  parts.push(`<text x="${left + width / 2}" y="${top + height + 40}" class="label">message size (bytes)</text>`);
  parts.push(
    `<text x="${left - 58}" y="${top + height / 2}" class="label" transform="rotate(-90 ${left - 58} ${top + height / 2})">${escapeXml(unit)}</text>`,
  );
  series.forEach((s, i) => {
    const color = kColors[i % kColors.length] as string;
    const points = s.points.filter((p) => value(p) > 0).sort((a, b) => a.bytes - b.bytes);
    if (points.length === 0) return;
    const path = points.map((p, j) => `${j === 0 ? 'M' : 'L'}${axis.x(p.bytes).toFixed(1)},${axis.y(value(p)).toFixed(1)}`);
    const dash = s.peer ? ' stroke-dasharray="6 4"' : '';
    parts.push(`<path d="${path.join(' ')}" stroke="${color}" class="line"${dash}/>`);
    for (const p of points) {
      parts.push(`<circle cx="${axis.x(p.bytes).toFixed(1)}" cy="${axis.y(value(p)).toFixed(1)}" r="2.5" fill="${color}"/>`);
    }
  });
  return parts.join('\n');
}

/** The SVG document: two panels and a legend. */
export function plotSvg(series: readonly PlotSeries[], title: string): string {
  const all = series.flatMap((s) => s.points);
  if (all.length === 0) throw new Error('nothing to plot');
  const bytesRange: [number, number] = [Math.min(...all.map((p) => p.bytes)), Math.max(...all.map((p) => p.bytes))];
  const legend = series.map((s, i) => {
    const x = 80 + (i % 4) * 260;
    const y = kHeight - 30 + Math.floor(i / 4) * 18;
    const color = kColors[i % kColors.length] as string;
    const dash = s.peer ? ' stroke-dasharray="6 4"' : '';
    return `<line x1="${x}" x2="${x + 24}" y1="${y - 4}" y2="${y - 4}" stroke="${color}" class="line"${dash}/><text x="${x + 30}" y="${y}" class="legend">${escapeXml(s.label)}</text>`;
  });
  const height = kHeight + Math.floor((series.length - 1) / 4) * 18;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${kWidth}" height="${height}" viewBox="0 0 ${kWidth} ${height}" font-family="system-ui, sans-serif">
<style>
  .title { font-size: 14px; font-weight: 600; text-anchor: middle; }
  .heading { font-size: 15px; font-weight: 600; }
  .frame { fill: #fff; stroke: #999; }
  .grid { stroke: #e3e3e3; }
  .xtick { font-size: 11px; text-anchor: middle; fill: #444; }
  .ytick { font-size: 11px; text-anchor: end; fill: #444; }
  .label { font-size: 12px; text-anchor: middle; fill: #444; }
  .legend { font-size: 12px; fill: #222; }
  .line { fill: none; stroke-width: 2; }
</style>
<rect width="100%" height="100%" fill="#fbfbfa"/>
<text x="20" y="26" class="heading">${escapeXml(title)}</text>
${panel(kPanel.left[0], 'bus bandwidth (higher is better)', 'busbw (GB/s)', series, (p) => p.busbwGBs, bytesRange)}
${panel(kPanel.left[1], 'time per call (lower is better)', 'time (µs)', series, (p) => p.timeUs, bytesRange)}
${legend.join('\n')}
</svg>
`;
}
