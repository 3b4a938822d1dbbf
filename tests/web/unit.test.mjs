// The page's pure modules under node's test runner: the Prometheus parser and quantile
// estimate behind the metrics panel, and the number formats of the report cards.
//   node --test tests/web/unit.test.mjs

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { compact, duration, fracPct, isSymbol, pct, price, signedPct, toChartTime } from '../../web/src/format.js';
import { histogramQuantile, parsePrometheus, summarize, value } from '../../web/src/metrics.js';
import { fnv1a, seriesKey } from '../../web/src/routing.js';

// The shape of a real `GET /metrics` scrape (abridged).
const SCRAPE = `# HELP kronos_time_to_first_step_seconds submit to first sampled step
# TYPE kronos_time_to_first_step_seconds histogram
kronos_time_to_first_step_seconds_bucket{le="0.01"} 0
kronos_time_to_first_step_seconds_bucket{le="0.05"} 1
kronos_time_to_first_step_seconds_bucket{le="0.1"} 3
kronos_time_to_first_step_seconds_bucket{le="0.25"} 4
kronos_time_to_first_step_seconds_bucket{le="+Inf"} 4
kronos_time_to_first_step_seconds_sum 0.31
kronos_time_to_first_step_seconds_count 4
kronos_requests_running 2
kronos_requests_waiting 5
kronos_kv_cache_used_bytes 15360
kronos_kv_cache_budget_bytes 6319014912
kronos_kv_cache_usage_ratio 2.43075863e-06
kronos_prefix_cache_queried_tokens_total 400
kronos_prefix_cache_hit_tokens_total 100
kronos_http_requests_total{route="/metrics",code="200"} 7
kronos_http_requests_total{route="/v1/analyze",code="400"} 1
kronos_server_profile_active{profile="a \\"quoted\\" name"} 1
this line is not a sample
`;

test('parsePrometheus reads names, labels (with escapes) and values', () => {
  const s = parsePrometheus(SCRAPE);
  assert.equal(value(s, 'kronos_requests_running'), 2);
  assert.equal(value(s, 'kronos_kv_cache_usage_ratio'), 2.43075863e-06);
  assert.equal(value(s, 'kronos_http_requests_total', { route: '/v1/analyze' }), 1);
  assert.equal(value(s, 'kronos_server_profile_active', { profile: 'a "quoted" name' }), 1);
  assert.equal(value(s, 'kronos_time_to_first_step_seconds_bucket', { le: '+Inf' }), 4);
  assert.equal(value(s, 'missing'), null);
  assert.ok(!s.some((x) => x.name === 'this'));
});

test('histogramQuantile interpolates inside the bucket, like PromQL', () => {
  const s = parsePrometheus(SCRAPE);
  // rank 2 of 4: in (0.05, 0.1], which holds observations 2 and 3 -> halfway.
  const close = (a, b) => assert.ok(Math.abs(a - b) < 1e-12, `${a} != ${b}`);
  close(histogramQuantile(s, 'kronos_time_to_first_step_seconds', 0.5), 0.075);
  // rank 0.4: in the first non-empty bucket (0.01, 0.05].
  close(histogramQuantile(s, 'kronos_time_to_first_step_seconds', 0.1), 0.026);
  // Nothing observed yet: no estimate rather than 0.
  const empty = parsePrometheus('x_bucket{le="1"} 0\nx_bucket{le="+Inf"} 0\n');
  assert.equal(histogramQuantile(empty, 'x', 0.5), null);
  // Rank in +Inf: the largest finite bound.
  const tail = parsePrometheus('y_bucket{le="1"} 0\ny_bucket{le="+Inf"} 3\n');
  assert.equal(histogramQuantile(tail, 'y', 0.5), 1);
});

test('summarize gives the panel its figures', () => {
  const m = summarize(parsePrometheus(SCRAPE));
  assert.equal(m.running, 2);
  assert.equal(m.waiting, 5);
  assert.ok(Math.abs(m.ttftP50 - 0.075) < 1e-12);
  assert.equal(m.prefixHitRate, 0.25);
  assert.equal(m.kvUsage, 2.43075863e-06);
  assert.equal(m.httpRequests, 8);
  const bare = summarize(parsePrometheus('kronos_kv_cache_used_bytes 50\nkronos_kv_cache_budget_bytes 200\n'));
  assert.equal(bare.kvUsage, 0.25); // derived when the ratio gauge is absent
  assert.equal(bare.prefixHitRate, null);
  assert.equal(bare.ttftP50, null);
});

test('formats', () => {
  assert.equal(fracPct(0.8125), '81%');
  assert.equal(fracPct(null), 'n/a');
  assert.equal(signedPct(3.8259), '+3.83%');
  assert.equal(signedPct(-2.441), '-2.44%');
  assert.equal(signedPct(0.001), '0.00%');
  assert.equal(pct(3.774), '3.77%');
  assert.equal(price(202.38), '202.38');
  assert.equal(price(12345.5), '12,345.50');
  assert.equal(price(0.001234), '0.001234');
  assert.equal(price(0.5), '0.50');
  assert.equal(compact(63956460), '63.96M');
  assert.equal(duration(0.0577), '57.7 ms');
  assert.equal(duration(2.5), '2.50 s');
  assert.equal(duration(null), '–');
});

test('chart times keep the stored wall-clock time', () => {
  assert.equal(toChartTime('2025-08-01'), Date.UTC(2025, 7, 1) / 1000);
  assert.equal(toChartTime('2024-06-18 11:15:00'), Date.UTC(2024, 5, 18, 11, 15) / 1000);
  assert.throws(() => toChartTime('yesterday'));
});

test('symbol names follow the store', () => {
  for (const ok of ['AAPL', '600977.SH', '^GSPC', 'EURUSD=X', 'BRK-B']) assert.ok(isSymbol(ok), ok);
  for (const bad of ['', 'A B', 'x'.repeat(33), 'a/b', null]) assert.ok(!isSymbol(bad), String(bad));
});

import { parseCsvCandles, scoreBacktest, splitForBacktest } from '../../web/src/backtest.js';

test('parseCsvCandles reads the columns the server reads, in any case and order', () => {
  const h = parseCsvCandles('\uFEFFDate,Close,Open,High,Low,Volume,Extra\n2024-01-02,10.5,10,11,9,5,x\n2024-01-03,10.8,10.5,11,10,6,y\n');
  assert.deepEqual(h.columns, ['timestamps', 'open', 'high', 'low', 'close', 'volume']);
  assert.deepEqual(h.candles[1], ['2024-01-03', 10.5, 11, 10, 10.8, 6]);
  assert.throws(() => parseCsvCandles('timestamps;open;high;low;close\n2024-01-01;1;2;0.5;1\n'), /";"/);
  assert.throws(() => parseCsvCandles('timestamps,open,high,low,close\n'), /no data rows/);
});

test('a backtest cuts the history and scores the forecast against what followed', () => {
  const rows = [];
  for (let i = 0; i < 10; i++) rows.push([`2024-01-${String(i + 1).padStart(2, '0')}`, 10, 11, 9, 10 + i]);
  const history = { columns: ['timestamps', 'open', 'high', 'low', 'close'], candles: rows };
  const { past, after } = splitForBacktest(history, 3);
  assert.equal(past.candles.length, 7);
  assert.deepEqual(after.map((r) => r[4]), [17, 18, 19]);
  assert.throws(() => splitForBacktest(history, 9), /1\.\.8/);
  const step = (lo, mid, hi) => ({ p10: { close: lo }, p90: { close: hi }, mean: { close: mid } });
  const report = { last: { close: 16 }, forecast: { steps: [step(16, 17, 18), step(15, 16, 17), step(18, 20, 22)] } };
  const sc = scoreBacktest(report, history.columns, after);
  assert.equal(sc.bars, 3);
  assert.ok(Math.abs(sc.coverage - 2 / 3) < 1e-12); // 17 in, 18 out, 19 in
  assert.equal(sc.realised, 19);
  assert.equal(sc.forecast, 20);
  assert.equal(sc.directionRight, true);
});

test('seriesKey: the symbol(s), else a hash of the first candle, stable across calls', () => {
  assert.equal(seriesKey({ symbol: 'aapl', horizon: 5 }), 'AAPL');
  assert.equal(seriesKey({ symbols: ['msft', 'AAPL'] }), 'AAPL,MSFT');
  const rows = [['2024-01-02', 1, 2, 0.5, 1.5], ['2024-01-03', 1.5, 2, 1, 1.8]];
  const k = seriesKey({ candles: rows });
  assert.match(k, /^h[0-9a-f]{8}$/);
  // One more bar: the same series, the same key; another first candle: another key.
  assert.equal(seriesKey({ candles: [...rows, ['2024-01-04', 1.8, 2, 1.7, 1.9]] }), k);
  assert.notEqual(seriesKey({ candles: rows.slice(1) }), k);
  assert.equal(seriesKey({ candles: 'timestamps,open\n2024-01-02,1\n2024-01-03,2' }),
    seriesKey({ candles: 'timestamps,open\n2024-01-02,1' }));
  assert.equal(seriesKey({}), '');
  assert.equal(fnv1a(''), '811c9dc5');
  assert.equal(fnv1a('a'), 'e40c292c');
});
