// The page's pure modules under node's test runner: the Prometheus parser and quantile
// estimate behind the metrics panel, the number formats of the report cards, the timestamps the
// chart reads, the chart's data and scales, the figures, the URL state, the API client's
// deadlines and retries (with a stand-in fetch) and the page's colour contrast.
//   node --test tests/web/unit.test.mjs

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { compact, duration, fracPct, isSymbol, num, pct, price, signedPct, toChartTime } from '../../web/src/format.js';
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

test('no minus sign on a value that rounds to zero', () => {
  assert.equal(signedPct(-0.001), '0.00%'); // "Expected return -0.00%"
  assert.equal(signedPct(-0.004), '0.00%');
  assert.equal(signedPct(-0.005001), '-0.01%');
  assert.equal(signedPct(-0), '0.00%');
  assert.equal(pct(-0.0001), '0.00%');
  assert.equal(num(-0.0001, 3), '0.000'); // "MACD histogram -0.000"
  assert.equal(num(-0.0006, 3), '-0.001');
  assert.equal(fracPct(-0.001), '0%');
  assert.equal(fracPct(-0.001, 1), '-0.1%');
  assert.equal(compact(-0.4), '0');
  assert.equal(compact(-4), '-4');
  assert.equal(price(-1e-15), '0.00');
});

test('a rounding that reaches the next unit moves to it', () => {
  assert.equal(compact(999999), '1.00M'); // not "1000.00k"
  assert.equal(compact(999.6), '1.00k');
  assert.equal(compact(999.4), '999');
  assert.equal(compact(-999999), '-1.00M');
  assert.equal(compact(999994), '999.99k');
  assert.equal(compact(999995000), '1.00B');
  assert.equal(compact(1e15), '1000.00T'); // no unit above T
  assert.equal(compact(null), 'n/a');
  assert.equal(duration(0.99996), '1.00 s');
  assert.equal(duration(0.0009996), '1.0 ms');
  assert.equal(duration(0.0004), '400 µs');
});

test('chart times keep the stored wall-clock time', () => {
  assert.equal(toChartTime('2025-08-01'), Date.UTC(2025, 7, 1) / 1000);
  assert.equal(toChartTime('2024-06-18 11:15:00'), Date.UTC(2024, 5, 18, 11, 15) / 1000);
  assert.throws(() => toChartTime('yesterday'));
});

import { parseTimestamp } from '../../web/src/timestamps.js';

test('every timestamp the server accepts is read as the server reads it (docs/api.md)', () => {
  const t = (y, mo, d, h = 0, mi = 0, s = 0) => Date.UTC(y, mo - 1, d, h, mi, s) / 1000;
  const cases = [
    ['2024-06-18', t(2024, 6, 18), false],
    ['2024-06-18 11:15', t(2024, 6, 18, 11, 15), true],
    ['2024-06-18T11:15:07', t(2024, 6, 18, 11, 15, 7), true],
    ['2024-06-18 11:15:07.123456', t(2024, 6, 18, 11, 15, 7), true], // fraction truncated
    ['2024-06-18T11:15:07,5', t(2024, 6, 18, 11, 15, 7), true],
    ['2024-06-18T11:15:07Z', t(2024, 6, 18, 11, 15, 7), true], // zone: wall-clock kept
    ['2024-06-18T11:15:07.250+05:30', t(2024, 6, 18, 11, 15, 7), true],
    ['2024-06-18 11:15:07 -0400', t(2024, 6, 18, 11, 15, 7), true],
    ['2024-06-18T11:15-04', t(2024, 6, 18, 11, 15), true],
    ['2024/6/8 9:30', t(2024, 6, 8, 9, 30), true],
    ['1718709300', 1718709300, true], // epoch seconds
    ['1718709300123', 1718709300, true], // epoch milliseconds
    [1718709300, 1718709300, true], // JSON numbers too
    [1718709300999, 1718709300, true],
    ['1718709300999999', 1718709300, true], // microseconds
    ['1718709307999999999', 1718709307, true], // nanoseconds, to the second (no double rounding)
    ['996624000', 996624000, true], // before 2001-09-09: one digit less
    ['996624000000', 996624000, true],
    [996624000000, 996624000, true], // pandas to_json of an older history
    ['20240618', t(2024, 6, 18), false], // YYYYMMDD
    [20240618, t(2024, 6, 18), false],
    ['  2024-06-18  ', t(2024, 6, 18), false],
    // Seconds with a fraction (pandas' float seconds) or a full exponent: truncated.
    ['1718709307.0', 1718709307, true],
    ['1718709307.999999', 1718709307, true],
    ['996624000.5', 996624000, true],
    ['1.718709307e9', 1718709307, true],
    ['1.7187093075E+09', 1718709307, true],
    ['17187093079e-1', 1718709307, true],
    ['0.1718709307e10', 1718709307, true],
    [1718709307.75, 1718709307, true], // a JSON number with a fraction
    [996624000.5, 996624000, true],
  ];
  for (const [ts, time, hasTime] of cases) assert.deepEqual(parseTimestamp(ts), { time, hasTime }, String(ts));
  // What the server refuses.
  for (const bad of ['yesterday', '2024-13-01', '2024-02-30', '2024-06-18 24:00', '2024-06-18 11:15:07 UTC',
    '2024-06-18T11:15:07+5', '12345678', '12345678901', '202406181115', '20240618111507',
    1718709300000000000, '1899-12-31', '2201-01-01', '0950-01-01', '2024-06/18',
    '20241301', 1.5, -1, null, undefined, '',
    // A fraction on anything but seconds, exponents that lost digits, half numbers.
    '1718709307999.5', '1718709307999999.5', '17187093.5', '20240618.5', '1.7187093e9',
    '1.718709307e12', '1718709307.', '.5', '1718709307.5.5', '1718709307e', '1718709307e+',
    '1718709307.5Z', '1718709307,5', '-1718709307.5', '1e9999999999', 1718709307999.5, 20240618.5]) {
    assert.equal(parseTimestamp(bad), null, String(bad));
  }
});

import { buildChartData, MIN_RANGE_FRACTION, priceFormatFor, withMinRange } from '../../web/src/chart-data.js';

function reportWith(lastClose, steps) {
  return { last: { close: lastClose }, forecast: { steps } };
}
const stepAt = (timestamp, p10, p50, p90, mean) =>
  ({ timestamp, p10: { close: p10 }, p50: { close: p50 }, p90: { close: p90 }, mean: { close: mean } });

test('the chart reads every timestamp format of an uploaded CSV', () => {
  const history = parseCsvCandles('time,open,high,low,close,volume\n' +
    '1718709300000,1,2,0.5,1.5,10\n1718709600000,1.5,2,1,1.8,11\n');
  const d = buildChartData(history, reportWith(1.8, [stepAt('2024-06-18 11:25:00', 1.7, 1.8, 1.9, 1.8)]));
  assert.deepEqual(d.bars.map((b) => b.time), [1718709300, 1718709600]);
  assert.equal(d.intraday, true);
  assert.equal(d.band.length, 2);
  const daily = parseCsvCandles('date,open,high,low,close\n20240102,1,2,0.5,1.5\n20240103,1.5,2,1,1.8\n');
  assert.equal(buildChartData(daily, reportWith(1.8, [stepAt('2024-01-04', 1, 2, 3, 2)])).intraday, false);
});

test('a history the chart cannot read throws before anything is drawn', () => {
  const bad = { columns: ['timestamps', 'open', 'high', 'low', 'close'], candles: [['2024-01-02', 1, 2, 0.5, 1.5], ['soon', 1, 2, 1, 1.8]] };
  assert.throws(() => buildChartData(bad, reportWith(1.8, [stepAt('2024-01-04', 1, 2, 3, 2)])), /unexpected timestamp 'soon'/);
  const unordered = { ...bad, candles: [['2024-01-03', 1, 2, 0.5, 1.5], ['2024-01-02', 1, 2, 1, 1.8]] };
  assert.throws(() => buildChartData(unordered, reportWith(1.8, [])), /do not increase/);
});

test('null forecast figures are gaps on the chart, not zeros', () => {
  const history = { columns: ['timestamps', 'open', 'high', 'low', 'close'], candles: [['2024-01-02', 1, 2, 0.5, 1.5], ['2024-01-03', 1, 2, 1, 1.8]] };
  const d = buildChartData(history, reportWith(1.8, [stepAt('2024-01-04', null, null, 2.2, null), stepAt('2024-01-05', 1.5, 1.9, 2.3, 1.95)]));
  const t4 = Date.UTC(2024, 0, 4) / 1000;
  assert.deepEqual(d.band[1], { time: t4 });
  assert.deepEqual(d.median[1], { time: t4 });
  assert.deepEqual(d.mean[2], { time: t4 + 86400, value: 1.95 });
  assert.deepEqual(d.band[0], { time: t4 - 86400, lower: 1.8, upper: 1.8 }); // grows out of the last close
});

test('the price format follows the price level (1e-5 coins, 3e9 indices)', () => {
  assert.deepEqual(priceFormatFor(202.38), { type: 'price', precision: 2, minMove: 0.01 });
  assert.deepEqual(priceFormatFor(1.234e-5), { type: 'price', precision: 8, minMove: 1e-8 });
  assert.deepEqual(priceFormatFor(0.5), { type: 'price', precision: 4, minMove: 0.0001 });
  assert.deepEqual(priceFormatFor(3e9), { type: 'price', precision: 0, minMove: 1 });
  assert.deepEqual(priceFormatFor(0), { type: 'price', precision: 2, minMove: 0.01 });
  // A 1e-5 close formatted with it keeps 4 significant digits, not "0.00".
  const f = priceFormatFor(1.234e-5);
  assert.equal((1.234e-5).toFixed(f.precision), '0.00001234');
  const history = { columns: ['timestamps', 'open', 'high', 'low', 'close'], candles: [['2024-01-02', 1.2e-5, 1.3e-5, 1.1e-5, 1.25e-5], ['2024-01-03', 1.25e-5, 1.3e-5, 1.2e-5, 1.234e-5]] };
  assert.equal(buildChartData(history, reportWith(1.234e-5, [])).priceFormat.precision, 8);
});

test('a flat series gets a minimum visible price range', () => {
  const flat = { priceRange: { minValue: 100 - 1e-6, maxValue: 100 + 1e-6 }, margins: { above: 0, below: 0 } };
  const w = withMinRange(flat);
  assert.ok(Math.abs(w.priceRange.maxValue - w.priceRange.minValue - 100 * MIN_RANGE_FRACTION) < 1e-9);
  assert.ok(Math.abs((w.priceRange.maxValue + w.priceRange.minValue) / 2 - 100) < 1e-9);
  assert.deepEqual(w.margins, flat.margins);
  const wide = { priceRange: { minValue: 90, maxValue: 110 } };
  assert.equal(withMinRange(wide), wide); // a real range is left alone
  assert.equal(withMinRange(null), null);
  const tiny = withMinRange({ priceRange: { minValue: 1e-5, maxValue: 1e-5 } });
  assert.ok(tiny.priceRange.maxValue - tiny.priceRange.minValue > 1e-8 * 1.9);
  const zero = { priceRange: { minValue: 0, maxValue: 0 } };
  assert.equal(withMinRange(zero), zero);
});

test('symbol names follow the store', () => {
  for (const ok of ['AAPL', '600977.SH', '^GSPC', 'EURUSD=X', 'BRK-B']) assert.ok(isSymbol(ok), ok);
  for (const bad of ['', 'A B', 'x'.repeat(33), 'a/b', null]) assert.ok(!isSymbol(bad), String(bad));
});

import { parseCsvCandles, scoreBacktest, splitForBacktest } from '../../web/src/backtest.js';
import { priceSe } from '../../web/src/format.js';

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
  assert.equal(sc.forecastSe, null); // a report without the mean's error (an older server)
  assert.equal(sc.directionRight, true);
  // The mean close's Monte Carlo error comes with it, printed as the reports print it.
  report.forecast.steps[2].standard_error = { mean: { close: 0.456 } };
  assert.equal(scoreBacktest(report, history.columns, after).forecastSe, 0.456);
  assert.equal(priceSe(0.456, 20), '± 0.46');
  assert.equal(priceSe(0.001, 20), '± <0.01');
  assert.equal(priceSe(0.0000123, 0.001234), '± 0.000012');
  assert.equal(priceSe(null, 20), null);
  // A band end of exactly 0 on a coin priced in millionths: the error keeps its own scale.
  assert.equal(priceSe(0.0000021, 0), '± 0.0000021');
  assert.equal(priceSe(0.456, 0), '± 0.46');
  assert.equal(priceSe(0, 0), '± <0.01');
  // So do the band's ends at that step (standard_error.p10 / .p90), each at its own decimals.
  assert.equal(sc.bandLo, 18);
  assert.equal(sc.bandHi, 22);
  assert.equal(sc.bandLoSe, null); // none from an older server or below 8 paths
  report.forecast.steps[2].standard_error = { mean: { close: 0.456 }, p10: { close: 0.61 }, p90: { close: 0.004 } };
  const sb = scoreBacktest(report, history.columns, after);
  assert.equal(sb.bandLoSe, 0.61);
  assert.equal(sb.bandHiSe, 0.004);
  // Null bands are not scored (null >= x would count as 0), a null mean gives no direction.
  const nulls = { last: { close: 16 }, forecast: { steps: [step(null, 17, null), step(15, 16, 17), step(18, null, 22)] } };
  const sn = scoreBacktest(nulls, history.columns, after);
  assert.equal(sn.coverage, 0.5); // 18 out of (15, 17), 19 in (18, 22)
  assert.equal(sn.forecast, null);
  assert.equal(sn.directionRight, null);
  assert.equal(sn.bandLo, 18); // the last compared step's band, and no error for it
  assert.equal(sn.bandLoSe, null);
  const none = { last: { close: 16 }, forecast: { steps: [step(null, null, null)] } };
  assert.equal(scoreBacktest(none, history.columns, after).coverage, null);
});

import { historyUpTo } from '../../web/src/history.js';

test('the history is pinned to the report\'s last bar', () => {
  const rows = [['2024-01-02', 1, 2, 0.5, 1.5], ['2024-01-03', 1, 2, 1, 1.8], ['2024-01-04', 1, 2, 1, 1.9]];
  const h = { object: 'candles', symbol: 'X', columns: ['timestamps', 'open', 'high', 'low', 'close'], rows: 3, candles: rows };
  // A candle stored between /v1/analyze and /v1/candles is not the chart's last bar.
  const pinned = historyUpTo(h, '2024-01-03');
  assert.deepEqual(pinned.candles.map((r) => r[0]), ['2024-01-02', '2024-01-03']);
  assert.equal(pinned.rows, 2);
  assert.equal(historyUpTo(h, '2024-01-04'), h);
  assert.equal(historyUpTo(h, '2024-01-04 00:00:00'), h);
  const intraday = { ...h, candles: [['1718709300', 1, 2, 0.5, 1.5], ['1718709600', 1, 2, 1, 1.8]] };
  assert.equal(historyUpTo(intraday, '2024-06-18 11:15:00').candles.length, 1);
});

import { bandSe, cardFigures, leans, priceAtReturn, technicalRows } from '../../web/src/figures.js';

// A report whose every nullable figure is null (docs/report.schema.json: number_or_null).
function nullReport() {
  return {
    last: { timestamp: '2025-08-01', close: 202.38 },
    forecast: { horizon: 20, paths: 32 },
    statistics: {
      prob_up: null, expected_close: null, expected_return_pct: null, return_std_pct: null,
      return_p10_pct: null, return_p50_pct: null, return_p90_pct: null, var95_pct: null, es95_pct: null,
      max_drawdown_pct: { mean: null, p50: null, p90: null }, forecast_volatility_pct: null,
      realized_volatility_pct: null, prob_volatility_above_realized: null,
      standard_error: { prob_up: null, expected_return_pct: null, var95_pct: null },
    },
    technical: {
      close: 202.38, sma_5: null, sma_20: null, sma_60: null, ema_5: null, ema_20: null, ema_60: null,
      rsi_14: null, rsi_state: 'unknown', macd: { line: null, signal: null, histogram: null },
      bollinger: { middle: null, upper: null, lower: null, percent_b: null, bandwidth_pct: null },
      atr_14: null, atr_14_pct: null, volume: { available: true, avg_5: null, avg_20: null, ratio_5_20: null, slope_sign: 0 },
      realized_volatility: { window_bars: 20, per_bar_pct: null, annualized_pct: null, bars_per_year: null, bars_per_day: null },
    },
  };
}

test('a null figure reads n/a everywhere, never the last close', () => {
  assert.equal(priceAtReturn(202.38, null), null);
  assert.equal(priceAtReturn(100, 5), 105);
  const cards = cardFigures(nullReport());
  assert.equal(cards.length, 6);
  for (const c of cards) {
    assert.doesNotMatch(`${c.value} ${c.sub}`, /202\.38(?! after)/, `${c.label}: ${c.value} / ${c.sub}`);
    assert.match(c.value, /^n\/a( \/ n\/a)?$/, `${c.label}: ${c.value}`);
    assert.equal(c.se, null, c.label);
    assert.equal(c.tone === 'risk' ? '' : c.tone, '', `${c.label} has no tone`);
  }
  assert.equal(cards[2].sub, 'n/a to n/a at the horizon');
  const rows = Object.fromEntries(technicalRows(nullReport().technical));
  for (const k of ['RSI 14', 'MACD histogram', 'Bollinger %b', 'ATR 14', 'Volume 5/20', 'Realised vol (ann.)']) {
    assert.equal(rows[k], 'n/a', k);
  }
  assert.equal(rows['SMA 20 / 60'], 'n/a / n/a');
  // Only one band edge known: that edge, and n/a for the other.
  const half = nullReport();
  half.statistics.return_p90_pct = 10;
  assert.equal(cardFigures(half)[2].value, 'n/a – 222.62');
});

test('the web rounds as the reports do: halves to even, the lean rule of the summary', () => {
  // printf rounds an exact half to even; toFixed rounded it up ("13%" beside the summary's "12%").
  assert.equal(fracPct(0.125), '12%');
  assert.equal(fracPct(0.375), '38%');
  assert.equal(fracPct(0.625), '62%');
  assert.equal(fracPct(0.8125, 1), '81.2%');
  assert.equal(fracPct(0.81251), '81%');
  assert.equal(pct(2.675), '2.67%'); // not a half in binary: as printf, below
  // A card is coloured exactly when the summary leans: 1 of 1 or 2 of 2 paths do not.
  const ac = (k, n) => Math.sqrt(((k + 2) / (n + 4)) * (1 - (k + 2) / (n + 4)) / (n + 4));
  assert.equal(leans(1, ac(1, 1), 1), false);
  assert.equal(leans(1, ac(2, 2), 2), false);
  assert.equal(leans(1, ac(8, 8), 8), true);
  assert.equal(leans(0.86, ac(578, 674), 674), true);
  assert.equal(leans(0.62, 0.07, 48), false);
  const one = nullReport();
  one.forecast.paths = 1;
  Object.assign(one.statistics, { prob_up: 1, prob_down: 0, standard_error: { prob_up: ac(1, 1), prob_down: ac(0, 1) } });
  assert.equal(cardFigures(one)[0].tone, '');
  // The drawdown card is the median over the paths, with its error; volatility too.
  Object.assign(one.statistics, { max_drawdown_pct: { p50: 2, p90: 5 }, forecast_volatility_pct: 1.5 });
  Object.assign(one.statistics.standard_error, { max_drawdown_pct: { p50: 0.25 }, forecast_volatility_pct: 0.1 });
  const c = cardFigures(one);
  assert.equal(c[4].se, '0.25%');
  assert.match(c[4].sub, /^median over the paths/);
  assert.equal(c[5].se, '0.10%');
});

test('the cards of a full report', () => {
  const r = nullReport();
  Object.assign(r.statistics, {
    prob_up: 0.8125, expected_close: 204, expected_return_pct: -0.001, return_std_pct: 2,
    return_p10_pct: -0.001, return_p90_pct: 0.001, var95_pct: 3, es95_pct: 4,
    standard_error: { prob_up: 0.004, expected_return_pct: 0.3, var95_pct: 0.5 },
  });
  const c = cardFigures(r);
  assert.equal(c[0].value, '81%');
  assert.equal(c[0].se, '<1 pp'); // as the reports print an error under half a point
  assert.equal(c[0].tone, 'up');
  assert.equal(c[1].value, '0.00%'); // not "-0.00%"
  assert.equal(c[2].sub, '0.00% to 0.00% at the horizon');
  assert.equal(c[2].se, null); // no per-step band errors in this report
  // The band's ends with their Monte Carlo errors from the horizon step, as the reports print
  // them; the card puts "± " before the first.
  r.statistics.return_p10_pct = -5;
  r.statistics.return_p90_pct = 5;
  r.forecast.steps = [
    { standard_error: { p10: { close: 9 }, p90: { close: 9 } } },
    { standard_error: { mean: { close: 0.43 }, p10: { close: 0.604 }, p90: { close: 0.001 } } },
  ];
  assert.equal(cardFigures(r)[2].se, '0.60 / ± <0.01');
  assert.equal(bandSe(r, 192.26, 212.5), '0.60 / ± <0.01');
  r.forecast.steps[1].standard_error.p90.close = null; // below 8 paths: none
  assert.equal(cardFigures(r)[2].se, null);
});

import { decodeState, encodeState, sameState } from '../../web/src/urlstate.js';

test('the analysis round-trips through the address bar', () => {
  const st = { symbol: '^GSPC', interval: '1d', horizon: 20 };
  const hash = encodeState(st);
  assert.match(hash, /^#symbol=%5EGSPC&interval=1d&horizon=20$/);
  assert.deepEqual(decodeState(hash), st);
  assert.deepEqual(decodeState('#symbol=EURUSD%3DX'), { symbol: 'EURUSD=X', interval: null, horizon: null });
  assert.deepEqual(decodeState('#symbol=AAPL&interval=1 day&horizon=9999'), { symbol: 'AAPL', interval: null, horizon: null });
  // Every interval the store takes comes back (10080m was dropped at 5 digits); none it refuses.
  assert.equal(decodeState('#symbol=AAPL&interval=10080m').interval, '10080m');
  assert.equal(decodeState('#symbol=AAPL&interval=100000s').interval, '100000s');
  assert.equal(decodeState('#symbol=AAPL&interval=100001s').interval, null);
  assert.equal(decodeState('#symbol=AAPL&interval=05m').interval, null);
  assert.equal(decodeState(''), null);
  assert.equal(decodeState('#symbol=a/b'), null);
  assert.ok(sameState(decodeState(hash), st));
  assert.ok(!sameState(st, { ...st, horizon: 5 }));
  assert.ok(!sameState(null, st));
});

import * as api from '../../web/src/api.js';

// A stand-in fetch: `script` answers each call in turn ({status, body, headers} | 'hang' | 'down').
function fakeFetch(script) {
  const calls = [];
  globalThis.fetch = (url, init) => {
    calls.push({ url, init });
    const a = script[Math.min(calls.length - 1, script.length - 1)];
    if (a === 'down') return Promise.reject(new TypeError('Failed to fetch'));
    if (a === 'hang') {
      return new Promise((_, reject) => init.signal.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError'))));
    }
    return Promise.resolve(new Response(a.body ?? '{}', { status: a.status ?? 200, headers: a.headers ?? {} }));
  };
  return calls;
}

test('Retry-After is read as seconds or a date', () => {
  assert.equal(api.retryAfterSeconds('3'), 3);
  assert.equal(api.retryAfterSeconds(null), null);
  assert.equal(api.retryAfterSeconds('soon'), null);
  const now = Date.parse('2025-01-01T00:00:00Z');
  assert.equal(api.retryAfterSeconds('Wed, 01 Jan 2025 00:00:05 GMT', now), 5);
});

test('a request with no answer fails at its deadline with a clear message', async () => {
  api.configure({ analyzeTimeoutMs: 50, getTimeoutMs: 50 });
  fakeFetch(['hang']);
  const t0 = Date.now();
  await assert.rejects(api.analyze({ symbol: 'AAPL' }), (e) => e.kind === 'timeout' && /no answer within/.test(e.message));
  assert.ok(Date.now() - t0 < 2000);
  api.configure({ analyzeTimeoutMs: 130_000, getTimeoutMs: 30_000 });
});

test('busy answers: one retry after a short Retry-After, then "busy, retry in N s"', async () => {
  const busy = { status: 429, headers: { 'Retry-After': '0' }, body: '{"error":{"message":"queue full"}}' };
  let calls = fakeFetch([busy, { body: '{"object":"list","data":[]}' }]);
  const told = [];
  const set = await api.analyze({ symbol: 'AAPL' }, { onRetry: (s) => told.push(s) });
  assert.deepEqual(set, { object: 'list', data: [] });
  assert.equal(calls.length, 2);
  assert.deepEqual(told, [0]);
  calls = fakeFetch([busy, busy]);
  await assert.rejects(api.analyze({ symbol: 'AAPL' }), (e) => e.status === 429 && /busy, retry in 0 s \(queue full\)/.test(e.message));
  assert.equal(calls.length, 2); // once only
  // A long wait is not retried by itself.
  calls = fakeFetch([{ status: 503, headers: { 'Retry-After': '60' } }]);
  await assert.rejects(api.getSymbols(), (e) => e.retryAfter === 60 && /busy, retry in 60 s/.test(e.message));
  assert.equal(calls.length, 1);
  // 503 without Retry-After (draining): the server's message.
  fakeFetch([{ status: 503, body: '{"error":{"message":"draining"}}' }]);
  await assert.rejects(api.getSymbols(), (e) => e.message === 'draining');
});

test('a server that comes back fires onReconnect once; the key goes on /v1 calls only', async () => {
  let n = 0;
  api.onReconnect(() => { n += 1; });
  fakeFetch(['down']);
  await assert.rejects(api.getMetricsText(), (e) => e.kind === 'network');
  await assert.rejects(api.getModels(), (e) => e.kind === 'network');
  assert.equal(n, 0);
  const metrics = { body: 'kronos_requests_running 0\n' };
  const calls = fakeFetch([metrics, metrics, { body: '{"object":"list","data":[]}' }]);
  assert.equal(await api.getMetricsText(), 'kronos_requests_running 0\n');
  await api.getMetricsText();
  assert.equal(n, 1);
  api.setApiKey('sekret');
  await api.getSymbols();
  assert.equal(calls[1].init.headers.Authorization, undefined); // /metrics
  assert.equal(calls[2].init.headers.Authorization, 'Bearer sekret');
  api.setApiKey('');
});

test('a cancelled call ends at once, its retry wait too, and is not an outage', async () => {
  let reconnects = 0;
  api.onReconnect(() => { reconnects += 1; });
  // Aborted while the server works on it.
  let ctl = new AbortController();
  let calls = fakeFetch(['hang']);
  const p = api.analyze({ symbol: 'AAPL' }, { signal: ctl.signal });
  ctl.abort();
  await assert.rejects(p, (e) => e.kind === 'cancelled' && e.message === 'cancelled');
  assert.equal(calls.length, 1);
  assert.ok(calls[0].init.signal.aborted, 'the request itself was aborted (the server cancels on disconnect)');
  // Aborted while waiting to retry a busy answer: no second request.
  ctl = new AbortController();
  calls = fakeFetch([{ status: 429, headers: { 'Retry-After': '5' } }, { body: '{}' }]);
  const q = api.analyze({ symbol: 'AAPL' }, { signal: ctl.signal, onRetry: () => ctl.abort() });
  await assert.rejects(q, (e) => e.kind === 'cancelled');
  assert.equal(calls.length, 1);
  // Already aborted: nothing is sent.
  calls = fakeFetch([{ body: '{}' }]);
  await assert.rejects(api.getCandles('AAPL', { signal: ctl.signal }), (e) => e.kind === 'cancelled');
  assert.equal(calls.length, 0);
  // A cancel is not a lost connection: the next answer fires no reconnect.
  fakeFetch([{ body: '{}' }]);
  await api.getModels();
  assert.equal(reconnects, 0);
});

import { inputForField } from '../../web/src/form-errors.js';

test('a refused field names the input it is shown beside', () => {
  assert.equal(inputForField('horizon'), 'horizon');
  assert.equal(inputForField('pred_len'), 'horizon');
  assert.equal(inputForField('top_p'), 'top-p');
  assert.equal(inputForField('symbol'), 'symbol');
  assert.equal(inputForField('symbols[3]'), 'symbol');
  assert.equal(inputForField('candles[17].high', { upload: true }), 'csv-file');
  assert.equal(inputForField('candles[17].high'), null); // a backtest's candles: the page sent them
  assert.equal(inputForField('body'), null);
  assert.equal(inputForField('constructor'), null); // not an inherited property
  assert.equal(inputForField(undefined), null);
  assert.equal(inputForField(''), null);
});

// WCAG 2.x contrast of the page's colours (style.css): text 4.5:1, focus rings 3:1.
function luminance(hex) {
  const [r, g, b] = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16) / 255)
    .map((c) => (c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4));
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}
const contrast = (a, b) => {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (hi + 0.05) / (lo + 0.05);
};

test('colour contrast: the primary button and the focus rings', () => {
  const css = readFileSync(new URL('../../web/src/style.css', import.meta.url), 'utf8');
  const accent = /--accent:\s*(#[0-9a-f]{6})/i.exec(css)[1];
  const primary = /button\.primary \{[^}]*color: #fff; background: linear-gradient\(135deg, (#[0-9a-f]{6}), (#[0-9a-f]{6})\)/i.exec(css);
  assert.ok(primary, 'the primary button is white text on a two-colour gradient');
  for (const stop of primary.slice(1)) assert.ok(contrast('#ffffff', stop) >= 4.5, `white on ${stop}: ${contrast('#ffffff', stop).toFixed(2)}`);
  const focus = /input:focus, select:focus \{ outline: 2px solid ([^;]+);/.exec(css)[1];
  assert.equal(focus, 'var(--accent)', 'an opaque focus ring');
  for (const bg of ['#0d131b', '#121821', '#17202b']) assert.ok(contrast(accent, bg) >= 3, `focus ring on ${bg}`);
  assert.ok(contrast('#ffffff', '#2f81f7') < 4.5); // the old colour, for the record
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

// ------------------------------------------------------------------ batch stream, ranking, narrative

import { SseParser } from '../../web/src/sse.js';

// A stream as the server writes it (docs/api.md "Streaming an analysis"), with a keep-alive.
const STREAM = 'event: progress\ndata: {"phase":"load","step":1,"steps":3,"symbol":"AAPL","message":"reading AAPL"}\n\n' +
  ': keep-alive\n\n' +
  'event: progress\ndata: {"phase":"forecast","step":2,"steps":3,"message":"forecasting 1 symbol"}\n\n' +
  'event: result\ndata: {"reports":[],"ranking":[],"failures":[]}\n\n';

const parseAll = (chunks) => {
  const p = new SseParser();
  const out = chunks.flatMap((c) => p.push(c));
  return { events: out.concat(p.end()), comments: p.comments };
};

test('SSE: events, data lines, comments and keep-alives', () => {
  const { events, comments } = parseAll([STREAM]);
  assert.deepEqual(events.map((e) => e.event), ['progress', 'progress', 'result']);
  assert.equal(JSON.parse(events[0].data).symbol, 'AAPL');
  assert.equal(comments, 1);
  // Several data lines join with "\n"; no space after the colon is fine; one space is dropped,
  // a second one kept; a line without a colon is a field with an empty value; unknown fields
  // and retry are ignored; an event with no data is dropped; no event name is "message".
  const more = parseAll(['data:a\ndata:  b\nretry: 10\nfoo: bar\n\nevent: x\n\ndata\n\nid: 7\ndata: z\n\n']).events;
  assert.deepEqual(more, [
    { event: 'message', data: 'a\n b', id: null },
    { event: 'message', data: '', id: null },
    { event: 'message', data: 'z', id: '7' },
  ]);
});

test('SSE: chunks split anywhere give the same events (mid-line, mid-event, mid-CRLF)', () => {
  const want = parseAll([STREAM]).events;
  for (const text of [STREAM, STREAM.replaceAll('\n', '\r\n'), STREAM.replaceAll('\n', '\r')]) {
    assert.deepEqual(parseAll([text]).events, want);
    for (let i = 0; i <= text.length; i++) {
      assert.deepEqual(parseAll([text.slice(0, i), text.slice(i)]).events, want, `split at ${i}`);
    }
    for (let i = 0; i < text.length; i += 7) {
      for (const j of [i + 1, i + 2, i + 13]) {
        assert.deepEqual(parseAll([text.slice(0, i), '', text.slice(i, j), text.slice(j)]).events, want, `split at ${i}, ${j}`);
      }
    }
    // One character at a time.
    assert.deepEqual(parseAll([...text]).events, want);
  }
  // A CR at the end of one chunk and the LF at the start of the next are one line end, not two
  // (two would dispatch an event early).
  const p = new SseParser();
  assert.deepEqual(p.push('data: a\r'), []);
  assert.deepEqual(p.push('\ndata: b\r\n\r\n'), [{ event: 'message', data: 'a\nb', id: null }]);
  // A byte order mark may open the stream; an event the stream ends inside is dropped.
  assert.deepEqual(parseAll(['\ufeffdata: x\n\n', 'data: cut']).events, [{ event: 'message', data: 'x', id: null }]);
});

// A stand-in fetch whose answer is an event stream sent in these chunks (text or bytes); `hang`:
// it stays open.
function streamFetch(chunks, { status = 200, headers = { 'Content-Type': 'text/event-stream' }, hang = false } = {}) {
  const calls = [];
  globalThis.fetch = (url, init) => {
    calls.push({ url, init, body: init.body === undefined ? undefined : JSON.parse(init.body) });
    const enc = new TextEncoder();
    const body = new ReadableStream({
      start(ctl) {
        for (const c of chunks) ctl.enqueue(typeof c === 'string' ? enc.encode(c) : c);
        if (!hang) ctl.close();
        init.signal.addEventListener('abort', () => ctl.error(new DOMException('aborted', 'AbortError')));
      },
    });
    return Promise.resolve(new Response(body, { status, headers }));
  };
  return calls;
}

test('analyzeBatch streams: progress then the result; Authorization and stream sent', async () => {
  // Split mid-line, and between the two bytes of the "·" of a message.
  const bytes = new TextEncoder().encode(STREAM.replace('reading AAPL', 'reading AAPL · 1d'));
  const cut = bytes.indexOf(0xb7); // the second byte of U+00B7
  const calls = streamFetch([bytes.slice(0, 30), bytes.slice(30, cut), bytes.slice(cut)]);
  api.setApiKey('k1');
  const seen = [];
  const set = await api.analyzeBatch({ symbols: ['AAPL'], interval: '1d', horizon: 5 }, { onProgress: (e) => seen.push(e) });
  api.setApiKey('');
  assert.deepEqual(set, { reports: [], ranking: [], failures: [] });
  assert.deepEqual(seen.map((e) => e.step), [1, 2]);
  assert.equal(seen[0].message, 'reading AAPL · 1d');
  assert.equal(calls[0].url, '/v1/analyze/batch');
  assert.deepEqual(calls[0].body, { symbols: ['AAPL'], interval: '1d', horizon: 5, format: 'json', stream: true });
  assert.equal(calls[0].init.headers.Authorization, 'Bearer k1');
  assert.equal(calls[0].init.headers.Accept, 'text/event-stream');
  assert.equal(calls[0].init.headers['X-Kronos-Series'], 'AAPL');
});

test('analyzeBatch: an error event, a refused request, a stream cut short, Cancel, silence', async () => {
  streamFetch(['event: progress\ndata: {"step":1,"steps":2}\n\n',
    'event: error\r\ndata: {"error":{"code":400,"message":"symbols[0]: NOPE: no candles stored","field":"symbols[0]"}}\r\n\r\n']);
  await assert.rejects(api.analyzeBatch({ symbols: ['NOPE'] }),
    (e) => e.status === 400 && e.field === 'symbols[0]' && /no candles stored/.test(e.message));
  // Refused before the stream started: a plain JSON error.
  streamFetch(['{"error":{"code":400,"message":"horizon: must be 1..256","field":"horizon"}}'], { status: 400, headers: {} });
  await assert.rejects(api.analyzeBatch({ symbols: ['AAPL'] }), (e) => e.status === 400 && e.field === 'horizon');
  // The stream ends without its result.
  streamFetch(['event: progress\ndata: {"step":1,"steps":2}\n\n']);
  await assert.rejects(api.analyzeBatch({ symbols: ['AAPL'] }), (e) => e.kind === 'network' && /before the result/.test(e.message));
  // Cancel in the middle: the request is aborted (the server cancels on the disconnect).
  const ctl = new AbortController();
  const calls = streamFetch(['event: progress\ndata: {"step":1,"steps":2}\n\n'], { hang: true });
  const p = api.analyzeBatch({ symbols: ['AAPL'] }, { signal: ctl.signal, onProgress: () => ctl.abort() });
  await assert.rejects(p, (e) => e.kind === 'cancelled');
  assert.ok(calls[0].init.signal.aborted);
  // Keep-alives hold the deadline off; silence past it fails with a clear message.
  api.configure({ streamIdleTimeoutMs: 50 });
  streamFetch([': keep-alive\n\n'], { hang: true });
  await assert.rejects(api.analyzeBatch({ symbols: ['AAPL'] }), (e) => e.kind === 'timeout' && /sent nothing for/.test(e.message));
  api.configure({ streamIdleTimeoutMs: 60_000 });
});

import { batchGroups, batchLabel, batchSeries, failedRow, intervalSeconds, nextSort, progressView, rankingRows, rowTexts, sortRows } from '../../web/src/batch.js';

test('a batch takes the ticked series, else the ones shown; one request per interval', () => {
  const items = [{ symbol: 'AAPL', interval: '1d' }, { symbol: 'AAPL', interval: '1h' }, { symbol: 'MSFT', interval: '1d' },
    { symbol: 'aapl', interval: '1d' }, { symbol: 'X', interval: '5m' }];
  assert.deepEqual(batchSeries(items, [0, 2], new Set()), [items[0], items[2]]);
  assert.deepEqual(batchSeries(items, [0], new Set(['MSFT\t1d', 'X\t5m'])), [items[2], items[4]]); // ticks outlive the filter
  assert.deepEqual(batchGroups(items), [
    { interval: '5m', symbols: ['X'] },
    { interval: '1h', symbols: ['AAPL'] },
    { interval: '1d', symbols: ['AAPL', 'MSFT'] },
    { interval: '1d', symbols: ['aapl'] }, // distinct without case within a request
  ]);
  assert.deepEqual(batchGroups([]), []);
  assert.equal(intervalSeconds('5min'), 300);
  assert.equal(intervalSeconds('1w'), 604800);
  assert.equal(intervalSeconds('tick'), Infinity);
  assert.equal(batchLabel(0, 5), 'Analyse all 5 shown');
  assert.equal(batchLabel(0, 1), 'Analyse the 1 shown');
  assert.equal(batchLabel(2, 5), 'Analyse 2 ticked');
});

test('the progress line says which request, which step and which symbol', () => {
  assert.deepEqual(progressView({ phase: 'load', step: 2, steps: 6, symbol: 'MSFT', message: 'reading MSFT' }),
    { text: 'step 2 of 6 · MSFT: reading MSFT', value: 2 / 6, max: 1, symbol: 'MSFT' });
  const v = progressView({ phase: 'render', step: 3, steps: 3, message: 'writing the JSON report' }, 2, 3);
  assert.equal(v.text, 'Request 2 of 3 · step 3 of 3: writing the JSON report');
  assert.equal(v.value, 2);
  assert.equal(v.max, 3);
  // Nonsense counts do not break the bar.
  assert.equal(progressView({ step: 9, steps: 0 }).value, 1);
});

// A batch answer's shape (docs/report.md), abridged.
const BATCH = {
  disclaimer: 'd',
  reports: [
    { symbol: 'AAPL', interval: '1d', statistics: { return_p10_pct: -1.5, return_p90_pct: 4.25 } },
    { symbol: 'MSFT', interval: '1d', statistics: { return_p10_pct: -3, return_p90_pct: 2 } },
    { symbol: 'BTC', interval: '1d', statistics: {} },
  ],
  ranking: [
    { rank: 1, group_rank: 1, symbol: 'AAPL', interval: '1d', prob_up: 0.81, expected_return_pct: 1.2, var95_pct: 2.1, es95_pct: 2.9,
      last_timestamp: '2025-08-01', stale: false, standard_error: { prob_up: 0.031, expected_return_pct: 0.4 }, indistinguishable_from: ['MSFT'] },
    { rank: 2, group_rank: 2, symbol: 'MSFT', interval: '1d', prob_up: 0.4, expected_return_pct: 0.9, var95_pct: 5, es95_pct: 6,
      last_timestamp: '2025-08-01', stale: false, standard_error: { prob_up: 0.002, expected_return_pct: 0.3 }, indistinguishable_from: ['AAPL'] },
    { rank: 3, group_rank: 3, symbol: 'BTC', interval: '1d', prob_up: null, expected_return_pct: -2, var95_pct: null, es95_pct: null,
      last_timestamp: '2021-06-10', stale: true, standard_error: { prob_up: null, expected_return_pct: null }, indistinguishable_from: [] },
  ],
  failures: [{ symbol: 'SHORT', interval: '1d', error: 'symbols[3]: SHORT 1d has 6 rows, at least 32 needed' }],
};

test('the ranking rows: figures with their uncertainty, the report, failures as rows', () => {
  const rows = rankingRows(BATCH, 10);
  assert.deepEqual(rows.map((r) => [r.symbol, r.order, r.rank, !!r.error]),
    [['AAPL', 10, 1, false], ['MSFT', 11, 2, false], ['BTC', 12, 3, false], ['SHORT', 13, null, true]]);
  assert.equal(rows[0].report, BATCH.reports[0]);
  assert.deepEqual(rowTexts(rows[0]), {
    probUp: '81% ± 3 pp', expectedReturn: '+1.20% ± 0.40%', band: 'p10–p90 -1.50% to +4.25%', risk: 'VaR 2.10% · ES 2.90%',
  });
  assert.equal(rowTexts(rows[1]).probUp, '40% ± <1 pp'); // never "± 0 pp", as the reports
  assert.deepEqual(rowTexts(rows[2]), { probUp: 'n/a', expectedReturn: '-2.00%', band: '', risk: 'VaR n/a · ES n/a' });
  assert.equal(rows[2].stale, true);
  assert.equal(rowTexts(rows[3]), null);
  assert.match(rows[3].error, /6 rows/);
  assert.deepEqual(rankingRows({}), []);
  assert.equal(failedRow('X', '', 'gone').key, 'X\t');
});

test('the ranking sorts by a column either way; failures and n/a last; ties in the server order', () => {
  const rows = rankingRows(BATCH);
  const order = (key, dir) => sortRows(rows, key, dir).map((r) => r.symbol).join();
  assert.equal(order('rank', 'asc'), 'AAPL,MSFT,BTC,SHORT');
  assert.equal(order('rank', 'desc'), 'BTC,MSFT,AAPL,SHORT');
  assert.equal(order('probUp', 'desc'), 'AAPL,MSFT,BTC,SHORT'); // BTC: n/a
  assert.equal(order('probUp', 'asc'), 'MSFT,AAPL,BTC,SHORT');
  assert.equal(order('expectedReturn', 'asc'), 'BTC,MSFT,AAPL,SHORT');
  assert.equal(order('var95', 'asc'), 'AAPL,MSFT,BTC,SHORT');
  assert.equal(order('symbol', 'desc'), 'MSFT,BTC,AAPL,SHORT');
  assert.equal(order('nonsense', 'asc'), 'AAPL,MSFT,BTC,SHORT');
  const tied = [{ ...rows[0], order: 0 }, { ...rows[1], order: 1, probUp: 0.81 }];
  assert.deepEqual(sortRows(tied, 'probUp', 'desc').map((r) => r.order), [0, 1]);
  assert.deepEqual(sortRows(tied, 'probUp', 'asc').map((r) => r.order), [0, 1]);
  assert.equal(rows[0].symbol, 'AAPL'); // a copy: the rows keep their order
  // A header click: the other way on the sorted column, else best first.
  assert.deepEqual(nextSort({ key: 'probUp', dir: 'desc' }, 'probUp'), { key: 'probUp', dir: 'asc' });
  assert.deepEqual(nextSort({ key: 'rank', dir: 'asc' }, 'expectedReturn'), { key: 'expectedReturn', dir: 'desc' });
  assert.deepEqual(nextSort({ key: 'rank', dir: 'asc' }, 'var95'), { key: 'var95', dir: 'asc' });
});

import { narrativeOffer, narrativeView } from '../../web/src/narrative.js';

test('the narrative is offered only when the server names its language model', () => {
  assert.deepEqual(narrativeOffer({ object: 'list', data: [], narrative: { model: 'gemma3' } }), { available: true, model: 'gemma3' });
  assert.deepEqual(narrativeOffer({ object: 'list', data: [], narrative: null }), { available: false, model: null });
  assert.deepEqual(narrativeOffer({ object: 'list', data: [] }), { available: false, model: null }); // an older server
  assert.deepEqual(narrativeOffer({ narrative: { model: '  ' } }), { available: false, model: null });
  assert.deepEqual(narrativeOffer({ narrative: true }), { available: false, model: null });
  assert.deepEqual(narrativeOffer(null), { available: false, model: null });
});

test('the narrative panel: the prose named as a model\'s, its failure explained, nothing when not asked', () => {
  const text = '<b>Paths lean up</b> ± 2 pp.';
  const v = narrativeView({ narrative: { text, model: 'gemma3', warning: null }, narrative_error: null }, 'gemma3');
  assert.equal(v.kind, 'text');
  assert.equal(v.text, text); // as written: the page sets it as text
  assert.match(v.title, /written by a language model \(gemma3\)/);
  assert.match(v.note, /not from the language model/);
  assert.equal(v.warning, null);
  const w = narrativeView({ narrative: { text, model: 'm', warning: 'the narrative mentions figures not in the report' } });
  assert.match(w.warning, /figures not in the report/);
  const e = narrativeView({ narrative: null, narrative_error: 'http://127.0.0.1:11434/api/generate: no complete answer within 60 s' }, 'gemma3');
  assert.equal(e.kind, 'error');
  assert.match(e.title, /gemma3 gave none/);
  assert.match(e.text, /no complete answer within 60 s.*figures above are complete/);
  assert.equal(narrativeView({ narrative: null, narrative_error: null }), null);
  assert.equal(narrativeView({}), null);
  assert.equal(narrativeView(null), null);
});

test('a refused narrative field is shown beside the Narrative box', () => {
  assert.equal(inputForField('narrative'), 'narrative');
});

import { ROLLING_DEFAULT_PATHS, rollingProgress, rollingRequest, rollingSummary, verdictKind } from '../../web/src/rolling.js';

test('a rolling backtest request takes the form\'s fields, 32 paths when they are auto', () => {
  const b = rollingRequest({ symbols: ['AAPL'], interval: '1d', horizon: 20, every: 5, seed: 0, temperature: 1, top_p: 0.9 });
  assert.deepEqual(b, { symbols: ['AAPL'], horizon: 20, every: 5, paths: ROLLING_DEFAULT_PATHS, interval: '1d', seed: 0,
    temperature: 1, top_p: 0.9 });
  const m = rollingRequest({ symbols: ['A', 'B'], horizon: 5, every: 1, paths: 8 });
  assert.deepEqual(m.strategy, { k: 1 }); // several symbols: the strategy too
  assert.equal(m.paths, 8);
  assert.throws(() => rollingRequest({ symbols: [], horizon: 5, every: 1 }), /pick a stored series/);
  assert.throws(() => rollingRequest({ symbols: ['A'], horizon: 5, every: 0 }), /origin every/);
  assert.throws(() => rollingRequest({ symbols: ['A'], horizon: 5, every: 2, paths: 1 }), /paths/);
  assert.throws(() => rollingRequest({ symbols: ['A'], horizon: 2.5, every: 2 }), /horizon/);
});

test('a backtest job\'s progress line and bar', () => {
  const st = (progress) => ({ progress });
  let p = rollingProgress(st({ phase: 'forecast', done: 340, total: 1000, elapsed_seconds: 12.2, eta_seconds: 23.4 }));
  assert.deepEqual(p, { value: 340, max: 1000, text: 'forecasting 340 / 1000 · 12 s · about 23 s left' });
  p = rollingProgress(st({ phase: 'forecast', done: 0, total: 10, elapsed_seconds: 0.1, eta_seconds: null }));
  assert.equal(p.text, 'forecasting 0 / 10 · 0 s'); // no estimate before the first batch
  p = rollingProgress(st({ phase: 'bootstrap', done: 0, total: 1, elapsed_seconds: 125, eta_seconds: null }));
  assert.deepEqual(p, { value: 0, max: 1, text: 'bootstrapping the intervals · 2 min 05 s' });
  assert.equal(rollingProgress(st({ phase: 'done', done: 1, total: 1, elapsed_seconds: 3 })).value, 1);
  assert.equal(rollingProgress(null).text, 'starting');
});

test('verdict sentences are coloured by their word only', () => {
  assert.equal(verdictKind('m beats naive on CRPS (Diebold-Mariano p = 0.01 < 0.05, 40 origins)'), 'better');
  assert.equal(verdictKind('m loses to drift on CRPS (Diebold-Mariano p = 0.001 < 0.05, 40 origins)'), 'worse');
  assert.equal(verdictKind('m vs naive on CRPS: not significant (Diebold-Mariano p = 0.4 >= 0.05, 40 origins)'), 'ns');
});

test('the rolling panel\'s summary line', () => {
  const r = { counts: { forecasts: 140, origins: 70 }, parameters: { horizon: 20, every: 5, paths: 32 },
    symbols: [{ symbol: 'AAPL' }, { symbol: 'MSFT' }] };
  assert.equal(rollingSummary(r), 'AAPL, MSFT · 140 forecasts at 70 origins · 20 bars ahead, an origin every 5 · 32 paths');
});

test('a backtest job\'s events: progress, then its final status; a cancelled job rejects', async () => {
  const status = (state, phase, done) => JSON.stringify({ object: 'backtest.job', id: 'ab', state,
    progress: { phase, done, total: 4, elapsed_seconds: 1, eta_seconds: 2 }, error: null });
  const calls = streamFetch([`event: progress\ndata: ${status('running', 'forecast', 2)}\n\n`,
    `: keep-alive\n\nevent: result\ndata: ${status('done', 'done', 1)}\n\n`]);
  const seen = [];
  const done = await api.followBacktest('/v1/backtest/ab/events', { onProgress: (s) => seen.push(s.progress.done) });
  assert.equal(done.state, 'done');
  assert.deepEqual(seen, [2]);
  assert.equal(calls[0].url, '/v1/backtest/ab/events');
  assert.equal(calls[0].init.method, 'GET');
  assert.equal(calls[0].body, undefined);
  assert.equal(calls[0].init.headers['Content-Type'], undefined);
  streamFetch(['event: error\ndata: {"state":"cancelled","error":{"code":499,"message":"the backtest was cancelled"}}\n\n']);
  await assert.rejects(api.followBacktest('/v1/backtest/ab/events'), (e) => e.status === 499 && /cancelled/.test(e.message));
});
