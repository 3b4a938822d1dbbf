// The web page end to end, as a person uses it: a real `kronos serve` over a fresh candle store
// (AAPL and MSFT ingested from data/), Debian's Chromium driven by playwright-core, and the
// page doing what it is for — pick AAPL, Analyze, read the chart and the numbers, watch the
// live metrics move; the interval picked is the one analysed, the sampling fields are sent, a
// CSV file is analysed, a backtest compares a past forecast with what happened, and the demo
// model is named on the page. Any failure exits non-zero; screenshots of the page and of a
// report's HTML are written either way.
//
//   node tests/web/e2e.mjs --kronos build/release/kronos [--web-root web/dist]
//        [--data data] [--screenshot build/web-e2e.png] [--chromium /usr/bin/chromium]
//
// Network: the browser may only reach the local server; every other request is aborted and
// fails the test (the page must work offline, no CDN).

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

function option(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const opts = {
  kronos: option('kronos', process.env.KRONOS_BIN || join(repo, 'build', 'release', 'kronos')),
  webRoot: option('web-root', join(repo, 'web', 'dist')),
  data: option('data', join(repo, 'data')),
  screenshot: option('screenshot', join(repo, 'build', 'web-e2e.png')),
  chromium: option('chromium', '/usr/bin/chromium'),
};
// playwright-core lives in web/node_modules (a devDependency of the page), not beside us.
const { chromium } = createRequire(join(repo, 'web', 'package.json'))('playwright-core');

const TOTAL_TIMEOUT_MS = 240_000;
const step = (msg) => console.log(`web-e2e: ${msg}`);
const fail = (msg) => {
  throw new Error(msg);
};

/** Runs `kronos serve` and resolves with {proc, url} once it prints its "listening on" line. */
function startServer(db) {
  const proc = spawn(opts.kronos, ['serve', '--port', '0', '--db', db, '--web-root', opts.webRoot,
    '--threads', '2'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  return new Promise((resolvePromise, reject) => {
    const timer = setTimeout(() => reject(new Error(`no 'listening on' line within 60 s:\n${log}`)), 60_000);
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (chunk) => {
      log += chunk;
      const m = /listening on (http:\/\/\S+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        resolvePromise({ proc, url: m[1], log: () => log });
      }
    });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`kronos serve exited with ${code} before listening:\n${log}`));
    });
  });
}

function ingest(db, symbol, file, interval = '1d') {
  const r = spawnSync(opts.kronos, ['ingest', '--db', db, '--symbol', symbol, '--interval', interval, file],
    { encoding: 'utf8' });
  if (r.status !== 0) fail(`kronos ingest ${symbol} failed (${r.status}): ${r.stderr}`);
}

async function waitFor(what, fn, timeoutMs = 30_000, everyMs = 100) {
  const t0 = Date.now();
  let last;
  for (;;) {
    last = await fn();
    if (last) return last;
    if (Date.now() - t0 > timeoutMs) fail(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

async function main() {
  for (const [what, path] of [['kronos binary', opts.kronos], ['web root', join(opts.webRoot, 'index.html')],
    ['chromium', opts.chromium]]) {
    if (!existsSync(path)) fail(`${what} not found at ${path}`);
  }
  const tmp = mkdtempSync(join(tmpdir(), 'kronos-web-e2e-'));
  const db = join(tmp, 'kronos.db');
  let server = null;
  let browser = null;
  let page = null;
  try {
    ingest(db, 'AAPL', join(opts.data, 'AAPL_1d.csv'));
    ingest(db, 'MSFT', join(opts.data, 'MSFT_1d.csv'));
    // A second, more recent AAPL series (hourly): the server's default for "AAPL" would be
    // this one, so the page must send the interval the user clicked.
    ingest(db, 'AAPL', join(opts.data, 'BTCUSDT_1h.csv'), '1h');
    server = await startServer(db);
    step(`server at ${server.url}`);
    if (!/DEMO MODEL — not a forecast/.test(server.log())) fail(`the start-up log does not name the demo model:\n${server.log()}`);
    const origin = new URL(server.url).origin;

    browser = await chromium.launchPersistentContext(join(tmp, 'profile'), {
      executablePath: opts.chromium,
      headless: true,
      args: ['--no-sandbox', '--headless', '--disable-gpu', '--disable-background-networking',
        '--disable-component-update', '--disable-sync', '--no-first-run'],
      viewport: { width: 1440, height: 1080 },
      deviceScaleFactor: 1,
    });
    const problems = [];
    const offsite = [];
    await browser.route('**/*', (route) => {
      const url = route.request().url();
      if (url.startsWith(`${origin}/`) || url.startsWith('data:') || url.startsWith('file:')) return route.continue();
      offsite.push(url);
      return route.abort();
    });
    page = browser.pages()[0] || await browser.newPage();
    const analyzeBodies = [];
    page.on('request', (req) => {
      if (req.url().endsWith('/v1/analyze') && req.method() === 'POST') analyzeBodies.push(JSON.parse(req.postData()));
    });
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('console', (m) => {
      // The unknown symbol below gets its 400 on purpose; Chromium logs that as an error.
      const expected = (m.location().url || '').includes('/v1/analyze');
      if (m.type() === 'error' && !expected) problems.push(`console error: ${m.text()}`);
    });
    page.on('response', (r) => {
      // 4xx on purpose below (the unknown symbol) is expected; anything else is not.
      if (r.status() >= 400 && !r.url().includes('/v1/analyze')) problems.push(`HTTP ${r.status()} ${r.url()}`);
    });

    const res = await page.goto(`${origin}/`, { waitUntil: 'load' });
    if (res.status() !== 200) fail(`GET / answered ${res.status()}`);
    if (!/text\/html/.test(res.headers()['content-type'] || '')) fail('GET / is not text/html');
    const aapl1d = '#symbol-list li[data-symbol="AAPL"][data-interval="1d"] button';
    await page.waitForSelector(aapl1d, { timeout: 15_000 });
    step('page loaded, stored symbols listed');
    await waitFor('the demo-model banner', async () => page.isVisible('#demo-banner'), 10_000);
    if (!/DEMO MODEL — not a forecast/.test(await page.textContent('#demo-banner'))) fail('the demo banner says something else');
    step('demo model banner shown');

    // Pick AAPL 1d from the stored list (AAPL 1h is stored too, more recently) and analyse it
    // with sampling fields of our own.
    await page.click(aapl1d);
    if ((await page.inputValue('#symbol')) !== 'AAPL') fail('clicking AAPL did not select it');
    await page.fill('#horizon', '20');
    await page.fill('#paths', '32');
    await page.fill('#temperature', '0.8');
    await page.fill('#top-p', '0.85');
    await page.click('#analyze');
    const prob = await waitFor('the probability-up figure', async () => {
      const t = (await page.textContent('#prob-up').catch(() => null)) || '';
      return /^\d{1,3}%$/.test(t.trim()) ? t.trim() : null;
    }, 90_000);
    step(`probability up shown: ${prob}`);

    // The chart: canvases laid out and actually painted (not just created).
    const painted = await waitFor('a painted chart canvas', () => page.evaluate(() => {
      let best = 0;
      for (const c of document.querySelectorAll('#chart canvas')) {
        if (c.width < 100 || c.height < 100) continue;
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
        best = Math.max(best, n);
      }
      return best > 2000 ? best : 0;
    }), 15_000);
    step(`chart painted (${painted} px)`);

    const title = await page.textContent('#chart-title');
    if (!/^AAPL · 1d$/.test(title.trim())) fail(`chart title is '${title}'`);
    const sent = analyzeBodies[analyzeBodies.length - 1] || {};
    if (sent.interval !== '1d' || sent.temperature !== 0.8 || sent.top_p !== 0.85 || sent.paths !== 32) {
      fail(`the page sent ${JSON.stringify(sent)}`);
    }
    if (!/±/.test(await page.textContent('#cards'))) fail('the figures carry no Monte Carlo error');
    step(`interval and sampling fields sent: ${JSON.stringify(sent)}`);
    const summary = await page.$$eval('#summary li', (xs) => xs.map((x) => x.textContent));
    if (summary.length < 3 || !/sampled paths/.test(summary[0])) fail(`summary looks wrong: ${JSON.stringify(summary)}`);
    const cards = await page.$$eval('#cards .card-value', (xs) => xs.map((x) => x.textContent.trim()));
    if (cards.length < 6 || !/%/.test(cards[1]) || !/–/.test(cards[2])) fail(`figures look wrong: ${JSON.stringify(cards)}`);
    if ((await page.$$('#technicals tr')).length < 6) fail('technicals table is empty');
    step(`figures: ${cards.join(' | ')}`);

    // Live metrics: the panel keeps scraping, and a forecast served by this server shows up
    // as a TTFT figure.
    const scrapes = async () => Number(await page.getAttribute('#m-updated', 'data-scrapes')) || 0;
    const s0 = await waitFor('a first metrics scrape', scrapes, 10_000);
    const fc = await fetch(`${origin}/v1/forecast`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({
        candles: [['2024-06-18 11:15:00', 11.27, 11.28, 11.26, 11.27, 379],
          ['2024-06-18 11:20:00', 11.27, 11.28, 11.27, 11.27, 277],
          ['2024-06-18 11:25:00', 11.27, 11.29, 11.26, 11.28, 410]],
        pred_len: 4,
        paths: 4,
      }),
    });
    if (fc.status !== 200) fail(`POST /v1/forecast answered ${fc.status}`);
    await waitFor('the metrics panel to scrape again', async () => (await scrapes()) >= s0 + 2, 10_000);
    const ttft = await waitFor('a TTFT p50 in the metrics panel', async () => {
      const t = (await page.textContent('#m-ttft')).trim();
      return /^\d+(\.\d+)? (µs|ms|s)$/.test(t) ? t : null;
    }, 10_000);
    const http = (await page.textContent('#m-http')).trim();
    if (!/^\d[\d,]*$/.test(http)) fail(`HTTP request count is '${http}'`);
    step(`metrics panel live: TTFT p50 ${ttft}, ${http} HTTP requests`);

    // A symbol that is not stored: the page says so instead of failing silently.
    await page.fill('#symbol', 'NOPE');
    await page.click('#analyze');
    await waitFor('the unknown-symbol message', async () =>
      /no candles stored for 'NOPE'/.test((await page.textContent('#status')) || ''), 30_000);
    step('unknown symbol reported');

    // A CSV file from disk, analysed without storing it.
    await page.setInputFiles('#csv-file', join(opts.data, 'MSFT_1d.csv'));
    await page.fill('#paths', '16');
    await page.click('#analyze');
    await waitFor('the uploaded file\'s report', async () =>
      /^MSFT_1d · 1d$/.test(((await page.textContent('#chart-title')) || '').trim()), 90_000);
    step('uploaded CSV analysed');

    // A backtest: the forecast made 20 bars before the last stored AAPL 1d bar, against what
    // happened.
    await page.click(aapl1d);
    await page.fill('#backtest-bars', '20');
    await page.click('#backtest');
    await waitFor('the backtest result', async () =>
      /^\d{1,3}%$/.test(((await page.textContent('#bt-coverage').catch(() => '')) || '').trim()), 90_000);
    if (await page.isHidden('#legend-actual')) fail('the backtest shows no realised line');
    step(`backtest: ${(await page.textContent('#backtest-result')).trim()}`);
    await page.waitForTimeout(300);
    await page.screenshot({ path: opts.screenshot.replace(/\.png$/, '-backtest.png'), fullPage: true }).catch(() => {});

    // Back to AAPL, with walk-forward calibration, for the screenshot.
    await page.click(aapl1d);
    await page.fill('#paths', '');
    await page.selectOption('#calibrate', '3');
    await page.click('#analyze');
    await waitFor('the report again', async () => /analysed/.test((await page.textContent('#status')) || ''), 90_000);
    if (await page.isHidden('#calibration-panel')) fail('the calibration panel is not shown');
    if ((await page.$$('#calibration tr')).length < 3) fail('the calibration table is empty');
    await page.waitForTimeout(300); // let the chart finish its animation frame

    // The report's HTML as kronos analyze writes it, looked at in the same browser.
    const htmlReport = join(tmp, 'report.html');
    const ar = spawnSync(opts.kronos, ['analyze', 'AAPL', 'MSFT', 'NOPE', '--interval', '1d', '--db', db, '--horizon', '10',
      '--format', 'html', '--out', htmlReport], { encoding: 'utf8' });
    if (ar.status !== 0) fail(`kronos analyze --format html failed (${ar.status}): ${ar.stderr}`);
    const rp = await browser.newPage();
    await rp.goto(`file://${htmlReport}`, { waitUntil: 'load' });
    const notice = (await rp.textContent('#model-notice')) || '';
    if (!/DEMO MODEL — not a forecast/.test(notice)) fail('the HTML report has no demo notice');
    if (!/NOPE/.test((await rp.textContent('#failures')) || '')) fail('the HTML report does not list the failed symbol');
    await rp.screenshot({ path: opts.screenshot.replace(/\.png$/, '-report.png'), fullPage: true });
    await rp.close();
    step('report HTML rendered');

    if (offsite.length) fail(`the page tried to reach other hosts: ${offsite.join(', ')}`);
    if (problems.length) fail(`browser problems:\n  ${problems.join('\n  ')}`);
  } finally {
    if (page) {
      mkdirSync(dirname(opts.screenshot), { recursive: true });
      await page.screenshot({ path: opts.screenshot, fullPage: true }).catch(() => {});
      step(`screenshot: ${opts.screenshot}`);
    }
    if (browser) await browser.close().catch(() => {});
    if (server) {
      const exited = new Promise((r) => server.proc.on('exit', (code) => r(code)));
      server.proc.kill('SIGTERM');
      const code = await Promise.race([exited, new Promise((r) => setTimeout(() => r('timeout'), 30_000))]);
      if (code !== 0) {
        server.proc.kill('SIGKILL');
        console.error(server.log());
        fail(`kronos serve did not drain and exit 0 on SIGTERM (got ${code})`);
      }
    }
    rmSync(tmp, { recursive: true, force: true });
  }
}

const guard = setTimeout(() => {
  console.error(`web-e2e: FAILED: no result within ${TOTAL_TIMEOUT_MS / 1000} s`);
  process.exit(1);
}, TOTAL_TIMEOUT_MS);
guard.unref();

main().then(() => {
  console.log('web-e2e: 1 passed, 0 failed');
  process.exit(0);
}, (e) => {
  console.error(`web-e2e: FAILED: ${e.message}`);
  process.exit(1);
});
