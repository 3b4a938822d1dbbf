// What the price chart draws, computed before anything is drawn: the candles, volume and
// forecast series in lightweight-charts' shapes, the price format for the series' price level
// and the price scale's minimum visible range. Pure (no DOM, no chart library), so
// tests/web/unit.test.mjs checks it under node; chart.js only hands the result to the library.
// A stamp that cannot be read fails the whole build (nothing half-drawn).

import { isNum, priceDigits } from './format.js';
import { parseTimestamp } from './timestamps.js';

/** The smallest span the price scale shows, as a fraction of the price level (0.2%). */
export const MIN_RANGE_FRACTION = 0.002;

const VOLUME_UP = 'rgba(38, 166, 154, 0.35)';
const VOLUME_DOWN = 'rgba(239, 83, 80, 0.35)';

function time(ts, what) {
  const p = parseTimestamp(ts);
  if (!p) throw new Error(`unexpected timestamp '${ts}' in ${what}`);
  return p.time;
}

/**
 * The price format of a series around `level`: 2 decimals; below 1, 4 significant digits (as
 * the page writes prices); from 100000 on, whole numbers (float32 data has no more digits there).
 */
export function priceFormatFor(level) {
  const a = Math.abs(level);
  const precision = !isNum(a) || a === 0 ? 2 : a >= 1e5 ? 0 : priceDigits(a);
  return { type: 'price', precision, minMove: Number((10 ** -precision).toFixed(precision)) };
}

/**
 * An autoscale result ({priceRange: {minValue, maxValue}, margins}) widened, around its middle,
 * to at least `fraction` of the price level: a flat series shows a flat line with axis labels
 * instead of its rounding noise magnified into a swing.
 */
export function withMinRange(info, fraction = MIN_RANGE_FRACTION) {
  if (!info || !info.priceRange) return info;
  const { minValue, maxValue } = info.priceRange;
  const mid = (minValue + maxValue) / 2;
  const floor = Math.abs(mid) * fraction;
  if (!(floor > 0) || maxValue - minValue >= floor) return info;
  return { ...info, priceRange: { minValue: mid - floor / 2, maxValue: mid + floor / 2 } };
}

/**
 * history: GET /v1/candles' shape (rows of arrays + columns); report: one report of
 * /v1/analyze; after: for a backtest, the rows that followed the history, else null.
 * The forecast lines and the band start at the last close, so they visibly grow out of it;
 * a step whose figure is null is a gap (whitespace), not a zero.
 */
export function buildChartData(history, report, after = null) {
  const col = Object.fromEntries(history.columns.map((name, i) => [name, i]));
  if (!('timestamps' in col) || !('close' in col)) throw new Error('the history has no timestamps or close column');
  if (history.candles.length === 0) throw new Error('no history to draw');
  const bars = history.candles.map((r) => ({
    time: time(r[col.timestamps], 'the history'),
    open: r[col.open],
    high: r[col.high],
    low: r[col.low],
    close: r[col.close],
  }));
  for (let i = 1; i < bars.length; i++) {
    if (bars[i].time <= bars[i - 1].time) throw new Error(`the history's times do not increase at row ${i + 1}`);
  }
  const volume = 'volume' in col
    ? history.candles.map((r, i) => ({
      time: bars[i].time,
      value: r[col.volume],
      color: bars[i].close >= bars[i].open ? VOLUME_UP : VOLUME_DOWN,
    }))
    : [];

  const last = bars[bars.length - 1];
  const anchor = { time: last.time, value: last.close };
  const steps = report.forecast.steps
    .map((s) => ({ ...s, time: time(s.timestamp, 'the forecast') }))
    .filter((s) => s.time > last.time);
  const close = (c) => (c && isNum(c.close) ? c.close : null);
  const line = (key) => [anchor, ...steps.map((s) => {
    const v = close(s[key]);
    return v === null ? { time: s.time } : { time: s.time, value: v };
  })];
  const band = [
    { time: last.time, lower: last.close, upper: last.close },
    ...steps.map((s) => {
      const lo = close(s.p10);
      const hi = close(s.p90);
      return lo === null || hi === null ? { time: s.time } : { time: s.time, lower: lo, upper: hi };
    }),
  ];
  const actual = after
    ? [anchor, ...after.map((r) => ({ time: time(r[col.timestamps], 'the bars after the cut'), value: r[col.close] }))]
    : [];

  return {
    bars,
    volume,
    band,
    median: line('p50'),
    mean: line('mean'),
    actual,
    lastTime: last.time,
    // Dates only unless some bar has a time of day (epoch stamps of daily data are midnights).
    intraday: bars.some((b) => b.time % 86400 !== 0),
    priceFormat: priceFormatFor(isNum(report.last && report.last.close) ? report.last.close : last.close),
  };
}
