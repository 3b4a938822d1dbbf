// `npm run build`: lays out dist/ as `kronos serve` serves it — dist/index.html and
// dist/assets/* (the page's own modules and styles, plus the chart library's standalone
// build from node_modules). A copy, not a bundler: the page is plain ES modules, and the
// third-party file stays exactly as npm installed it (verified by package-lock.json).
import { copyFileSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const src = join(here, 'src');
const dist = join(here, 'dist');
const assets = join(dist, 'assets');
const chartLib = join(here, 'node_modules', 'lightweight-charts', 'dist',
  'lightweight-charts.standalone.production.js');

try {
  statSync(chartLib);
} catch {
  console.error(`build: ${chartLib} is missing: run 'npm ci' in web/ first`);
  process.exit(1);
}

// Start clean so a file removed from src/ does not linger in dist/.
rmSync(dist, { recursive: true, force: true });
mkdirSync(assets, { recursive: true });
copyFileSync(join(src, 'index.html'), join(dist, 'index.html'));
let n = 1;
for (const name of readdirSync(src)) {
  if (name === 'index.html' || !/\.(js|css)$/.test(name)) continue;
  copyFileSync(join(src, name), join(assets, name));
  n++;
}
copyFileSync(chartLib, join(assets, 'lightweight-charts.standalone.production.js'));
n++;
console.log(`build: ${n} files in ${dist}`);
