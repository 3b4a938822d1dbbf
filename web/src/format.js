// Number and time formatting for the page. Pure functions (no DOM), so tests/web/unit.test.mjs
// checks them under node. Missing figures (null in the report JSON: "cannot be computed") read
// "n/a", as in the Markdown and HTML reports.

const NA = 'n/a';

const isNum = (x) => typeof x === 'number' && Number.isFinite(x);

/** A fraction as a percentage: 0.8125 -> "81%" (digits decimals). */
export function fracPct(x, digits = 0) {
  return isNum(x) ? `${(x * 100).toFixed(digits)}%` : NA;
}

/** A value already in percent (the report's *_pct keys), signed: 3.826 -> "+3.83%". */
export function signedPct(x, digits = 2) {
  if (!isNum(x)) return NA;
  const s = x.toFixed(digits);
  return `${x > 0 && Number(s) !== 0 ? '+' : ''}${s}%`;
}

/** A value already in percent, unsigned: 3.77 -> "3.77%". */
export function pct(x, digits = 2) {
  return isNum(x) ? `${x.toFixed(digits)}%` : NA;
}

/** A price: 2 decimals; below 1, up to 4 significant digits so small coins keep theirs. */
export function price(x) {
  if (!isNum(x)) return NA;
  const a = Math.abs(x);
  const digits = a >= 1 || a === 0 ? 2 : Math.min(10, 3 - Math.floor(Math.log10(a)));
  return x.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: digits });
}

/** A plain number with fixed decimals. */
export function num(x, digits = 2) {
  return isNum(x) ? x.toFixed(digits) : NA;
}

/** Large counts compactly: 63956460 -> "63.96M". */
export function compact(x) {
  if (!isNum(x)) return NA;
  const a = Math.abs(x);
  for (const [div, unit] of [[1e12, 'T'], [1e9, 'B'], [1e6, 'M'], [1e3, 'k']]) {
    if (a >= div) return `${(x / div).toFixed(2)}${unit}`;
  }
  return x.toFixed(0);
}

/** Seconds as a short duration: 0.0577 -> "57.7 ms", 2.5 -> "2.50 s". */
export function duration(s) {
  if (!isNum(s)) return '–';
  if (s < 1e-3) return `${(s * 1e6).toFixed(0)} µs`;
  if (s < 1) return `${(s * 1e3).toFixed(1)} ms`;
  return `${s.toFixed(2)} s`;
}

/**
 * A report timestamp ("2025-08-01" or "2025-08-01 15:30:00", the data's naive wall-clock time)
 * as the chart's UTCTimestamp (seconds). Treating the naive time as UTC keeps the chart's axis
 * showing exactly the stored wall-clock times, whatever the browser's zone.
 */
export function toChartTime(ts) {
  const m = /^(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2})(?::(\d{2}))?)?$/.exec(ts);
  if (!m) throw new Error(`unexpected timestamp '${ts}'`);
  const [, y, mo, d, h = '0', mi = '0', s = '0'] = m;
  return Date.UTC(+y, +mo - 1, +d, +h, +mi, +s) / 1000;
}

/** Symbol names the store accepts (market/store.h): 1..32 of [A-Za-z0-9._-^=]. */
export function isSymbol(s) {
  return typeof s === 'string' && /^[A-Za-z0-9._\-^=]{1,32}$/.test(s);
}
