// The HTML analysis report's layout (issue 42, finding 4) in Debian's Chromium at the widths
// people use, 1280, 1440 and 1920 px: a single-symbol report and a batch report (its ranking
// tables, an hourly one among them) must not scroll sideways, no table cell may clip its
// content (the "Model and run" table left its card, horizon labels wrapped onto 3-4 lines), and
// no table may be wider than its card. Reports are made by `kronos analyze` on the bundled
// candles with the demo model. Screenshots go to --out.
//
//   node tests/web/report_layout.mjs --kronos build/release/kronos [--data data]
//        [--chromium /usr/bin/chromium] [--out build/report-layout]

import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const option = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
};
const kronos = option('kronos', join(repo, 'build', 'release', 'kronos'));
const data = option('data', join(repo, 'data'));
const chromiumPath = option('chromium', '/usr/bin/chromium');
const out = option('out', join(repo, 'build', 'report-layout'));
const { chromium } = createRequire(join(repo, 'web', 'package.json'))('playwright-core');

const tmp = mkdtempSync(join(tmpdir(), 'kronos-layout-'));
const db = join(tmp, 'k.db');
function run(args) {
  const r = spawnSync(kronos, args, { encoding: 'utf8', env: { ...process.env, KRONOS_DB: '' } });
  if (r.status !== 0) throw new Error(`kronos ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

const failures = [];
try {
  for (const [sym, file] of [['AAPL', 'AAPL_1d.csv'], ['MSFT', 'MSFT_1d.csv'],
    ['600977.SH', 'XSHG_5min_600977.csv'], ['BTCUSDT', 'BTCUSDT_1h.csv']])
    run(['ingest', '--db', db, '--symbol', sym, join(data, file)]);
  const single = join(tmp, 'single.html');
  const batch = join(tmp, 'batch.html');
  // Few paths: the layout, not the figures, is under test.
  run(['analyze', 'AAPL', '--db', db, '--horizon', '20', '--paths', '16', '--max-paths', '16',
    '--calibrate', '3', '--format', 'html', '--out', single]);
  run(['analyze', 'AAPL', 'MSFT', '600977.SH', 'BTCUSDT', '--db', db, '--horizon', '20',
    '--paths', '16', '--max-paths', '16', '--format', 'html', '--out', batch]);
  mkdirSync(out, { recursive: true });

  const browser = await chromium.launch({ executablePath: chromiumPath, headless: true,
    args: ['--no-sandbox', '--headless', '--disable-gpu'] });
  try {
    for (const width of [1280, 1440, 1920]) {
      const page = await browser.newPage({ viewport: { width, height: 1000 } });
      for (const [name, file] of [['single', single], ['batch', batch]]) {
        await page.goto(pathToFileURL(file).href);
        const found = await page.evaluate(() => {
          const bad = [];
          const de = document.documentElement;
          if (de.scrollWidth > de.clientWidth)
            bad.push(`the page scrolls sideways: ${de.scrollWidth} > ${de.clientWidth} px`);
          const label = (el) => {
            const t = el.closest('table');
            const head = t && (t.caption?.textContent || t.closest('section,div')?.querySelector('h2,h3')?.textContent || '');
            return `${head ? `[${head.trim().slice(0, 40)}] ` : ''}"${el.textContent.trim().slice(0, 50)}"`;
          };
          for (const cell of document.querySelectorAll('table td, table th')) {
            if (cell.scrollWidth > cell.clientWidth + 1)
              bad.push(`clipped cell ${label(cell)}: ${cell.scrollWidth} > ${cell.clientWidth} px`);
          }
          for (const card of document.querySelectorAll('section.card')) {
            if (card.scrollWidth > card.clientWidth + 1)
              bad.push(`card ${label(card.querySelector('h2') || card)} scrolls sideways: ${card.scrollWidth} > ${card.clientWidth} px`);
          }
          for (const t of document.querySelectorAll('table')) {
            const box = t.parentElement;
            if (t.getBoundingClientRect().right > box.getBoundingClientRect().right + 1 &&
                getComputedStyle(box).overflowX === 'visible')
              bad.push(`table ${label(t.querySelector('th,td') || t)} runs out of its box`);
          }
          // A cell's text never wraps onto more than two lines (horizon labels took 3-4).
          const lines = (el) => {
            const r = document.createRange();
            r.selectNodeContents(el);
            return new Set([...r.getClientRects()].map((b) => Math.round(b.top))).size;
          };
          for (const cell of document.querySelectorAll('table th, table td')) {
            const n = lines(cell);
            if (n > 2 && cell.textContent.trim().length < 60)
              bad.push(`cell ${label(cell)} wraps onto ${n} lines`);
          }
          return bad;
        });
        await page.screenshot({ path: join(out, `${name}-${width}.png`), fullPage: true });
        for (const f of found) failures.push(`${name} at ${width} px: ${f}`);
        console.log(`report-layout: ${name} at ${width} px: ${found.length ? `${found.length} problem(s)` : 'ok'}`);
      }
      await page.close();
    }
  } finally {
    await browser.close();
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
if (failures.length) {
  for (const f of failures) console.error(`FAIL: ${f}`);
  process.exit(1);
}
console.log('report-layout: every width holds');
