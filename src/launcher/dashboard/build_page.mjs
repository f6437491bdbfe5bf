// Build step (npm run build, after tsc): copies the dashboard page (page/) and the chart library
// it uses (uPlot, from its npm package) next to the compiled server, so the page is served from
// the package itself: no CDN, no network.
import { copyFileSync, mkdirSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, '../../../dist/src/launcher/dashboard/page');
mkdirSync(out, { recursive: true });
for (const name of readdirSync(join(here, 'page'))) copyFileSync(join(here, 'page', name), join(out, name));
const uplot = dirname(createRequire(import.meta.url).resolve('uplot/package.json'));
for (const name of ['uPlot.iife.min.js', 'uPlot.min.css']) copyFileSync(join(uplot, 'dist', name), join(out, name));
