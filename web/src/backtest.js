// The page's pure helpers for its uploads and backtests (no DOM, no fetch), so
// tests/web/unit.test.mjs checks them under node:
//   parseCsvCandles  a candle CSV as the user picked it, into GET /v1/candles' shape (rows of
//                    arrays + columns), for the chart — the server parses the same text itself;
//   splitForBacktest the history cut at a past bar: what the model may see, what happened;
//   scoreBacktest    a forecast made at that bar against what happened.

const ROLES = ['timestamps', 'open', 'high', 'low', 'close', 'volume', 'amount'];
const TS_ALIASES = ['timestamps', 'timestamp', 'datetime', 'date', 'time'];

/** CSV text -> {columns, candles} (the columns found, case-insensitive as the server reads). */
export function parseCsvCandles(text) {
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/).filter((l) => l.trim() !== '');
  if (lines.length < 2) throw new Error('the file has no data rows');
  const header = lines[0].split(',').map((h) => h.trim().replace(/^"|"$/g, '').toLowerCase());
  const index = {};
  header.forEach((h, i) => {
    const role = TS_ALIASES.includes(h) ? 'timestamps' : h;
    if (ROLES.includes(role) && !(role in index)) index[role] = i;
  });
  for (const need of ROLES.slice(0, 5)) {
    if (!(need in index)) {
      const semi = lines[0].includes(';') ? ' (the header uses ";": save the file comma-separated)' : '';
      throw new Error(`the header has no '${need}' column${semi}`);
    }
  }
  const columns = ROLES.filter((r) => r in index);
  const candles = lines.slice(1).map((line) => {
    const f = line.split(',').map((x) => x.trim().replace(/^"|"$/g, ''));
    return columns.map((c) => (c === 'timestamps' ? f[index[c]] : Number(f[index[c]])));
  });
  return { columns, candles };
}

/** The history up to `barsBack` bars before its end (the model's view) and the bars after. */
export function splitForBacktest(history, barsBack) {
  const n = history.candles.length;
  if (!(barsBack >= 1) || barsBack >= n - 1) throw new Error(`bars back must be in 1..${n - 2}`);
  return {
    past: { ...history, candles: history.candles.slice(0, n - barsBack) },
    after: history.candles.slice(n - barsBack),
  };
}

/**
 * A report made at the cut against the bars that followed (rows in `columns` order): the
 * share of realised closes inside the forecast's p10-p90 band, whether the direction at the
 * last compared step was right, and the realised and forecast closes there. A step whose band
 * or mean the report leaves null is not scored: coverage counts the steps with a band (null
 * when none has one) and the direction is null when the mean is missing; forecastSe is the
 * mean close's Monte Carlo error, null when the report has none; bandLo / bandHi the p10 / p90
 * closes at that step and bandLoSe / bandHiSe their errors (null when absent).
 */
export function scoreBacktest(report, columns, after) {
  const ci = columns.indexOf('close');
  const steps = report.forecast.steps;
  const n = Math.min(steps.length, after.length);
  if (n < 1) throw new Error('no bar after the cut to compare with');
  const isNum = (x) => typeof x === 'number' && Number.isFinite(x);
  let inside = 0;
  let banded = 0;
  for (let k = 0; k < n; k++) {
    const c = after[k][ci];
    const lo = steps[k].p10 && steps[k].p10.close;
    const hi = steps[k].p90 && steps[k].p90.close;
    if (!isNum(lo) || !isNum(hi)) continue;
    banded += 1;
    if (c >= lo && c <= hi) inside += 1;
  }
  const last = report.last.close;
  const realised = after[n - 1][ci];
  const mean = steps[n - 1].mean && steps[n - 1].mean.close;
  const forecast = isNum(mean) ? mean : null;
  // The mean close's Monte Carlo error (steps[].standard_error.mean; absent from older servers),
  // and the band's ends there with theirs (standard_error.p10 / .p90; none below 8 paths).
  const errs = steps[n - 1].standard_error || {};
  const se = errs.mean;
  const at = (c) => (c && isNum(c.close) ? c.close : null);
  const bandLo = at(steps[n - 1].p10);
  const bandHi = at(steps[n - 1].p90);
  return {
    bars: n,
    coverage: banded ? inside / banded : null,
    realised,
    forecast,
    forecastSe: forecast !== null && se && isNum(se.close) ? se.close : null,
    bandLo,
    bandHi,
    bandLoSe: bandLo === null ? null : at(errs.p10),
    bandHiSe: bandHi === null ? null : at(errs.p90),
    directionRight: forecast === null ? null : Math.sign(realised - last) === Math.sign(forecast - last),
    realisedReturnPct: (realised / last - 1) * 100,
  };
}
