// Timestamps as the server reads them (market/candles.c, kr_parse_timestamp), into the chart's
// UTCTimestamp (seconds). Pure (no DOM), so tests/web/unit.test.mjs checks it under node.
//
// Accepted, as in docs/api.md: YYYY-MM-DD (or YYYY/MM/DD, one- or two-digit month and day),
// optionally followed by ' ' or 'T' and H:MM[:SS[.fff]] with an optional Z or ±HH[[:]MM] zone
// suffix (validated, then ignored: the wall-clock time is used), and bare integers — 8 digits
// YYYYMMDD, else an epoch count whose length tells its unit: seconds (10 digits, 9 before
// 2001-09-09), milliseconds (13, 12; a 12-digit one that also reads as YYYYMMDDHHMM is
// refused), microseconds (16, 15) and nanoseconds (19, 18) — as strings, or JSON numbers below
// 1e13. Epoch seconds may carry a fraction ("1704412800.0", pandas' float seconds) or an
// exponent naming every digit of the second ("1.7044128005e9"), the fraction truncated; a
// fraction on another count, or an exponent with too few digits, is refused; a JSON number
// with a fraction is seconds when its whole part has 9-10 digits. Every stamp must fall in the
// years 1900–2200. The naive wall-clock time is treated as UTC so
// the chart's axis shows exactly the data's times, whatever the browser's zone.

const YEAR_MIN = 1900;
const YEAR_MAX = 2200;
const T_MIN = Date.UTC(YEAR_MIN, 0, 1) / 1000;
const T_END = Date.UTC(YEAR_MAX + 1, 0, 1) / 1000;

const DATE_TIME = new RegExp(
  '^(\\d{4})([-/])(\\d{1,2})\\2(\\d{1,2})' + // date, one separator throughout
  '(?:[ Tt](\\d{1,2}):(\\d{2})(?::(\\d{2})(?:[.,]\\d+)?)?' + // time, fraction truncated
  ' ?(?:[Zz]|[+-]\\d{2}(?::?\\d{2})?)?)?$', // zone suffix
);

function daysInMonth(y, m) {
  return new Date(Date.UTC(y, m, 0)).getUTCDate();
}

function civil(y, mo, d, h = 0, mi = 0, s = 0) {
  if (y < YEAR_MIN || mo < 1 || mo > 12 || d < 1 || d > daysInMonth(y, mo) || h > 23 || mi > 59 || s > 59) return null;
  return Date.UTC(y, mo - 1, d, h, mi, s) / 1000;
}

const DECIMAL = /^(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;

/**
 * Epoch seconds written as a decimal (market/candles.c parse_epoch_decimal): the whole
 * seconds, or null when the fraction or the exponent makes the count ambiguous.
 */
function epochDecimal(s) {
  const m = DECIMAL.exec(s);
  if (!m || (m[2] === undefined && m[3] === undefined)) return null;
  const [, whole, frac = '', exp] = m;
  let digits = whole + frac;
  let beforePoint = whole.length;
  if (exp !== undefined) {
    // Leading zeros of a mantissa do not count; an exponent must leave every digit of the
    // second written (1.70441e9 was rounded by its writer).
    const lead = digits.length - digits.replace(/^0+(?=\d)/, '').length;
    digits = digits.slice(lead);
    const e = Number(exp);
    if (!Number.isFinite(e) || Math.abs(e) > 1000) return null;
    beforePoint += e - lead;
    if (beforePoint > digits.length) return null;
  }
  if (beforePoint !== 9 && beforePoint !== 10) return null;
  return Number(digits.slice(0, beforePoint));
}

/**
 * A stamp (string or number) -> {time, hasTime} (time in seconds), or null when the server
 * would refuse it. hasTime: the stamp carries a time of day (epoch numbers always do).
 */
export function parseTimestamp(ts) {
  let s;
  if (typeof ts === 'number') {
    // A fraction: seconds when the whole part has 9-10 digits (truncated), else refused.
    const n = !Number.isInteger(ts) && ts >= 1e8 && ts < 1e10 ? Math.floor(ts) : ts;
    if (!Number.isInteger(n) || n < 0 || n >= 1e13) return null;
    s = String(n);
  } else if (typeof ts === 'string') {
    s = ts.trim();
  } else {
    return null;
  }
  let time = null;
  let hasTime = true;
  if (/^\d+$/.test(s)) {
    const n = s.length;
    // Digits of the unit below seconds, by length (BigInt: 19 digits are past a double's 2^53).
    const sub = { 9: 0, 10: 0, 12: 3, 13: 3, 15: 6, 16: 6, 18: 9, 19: 9 }[n];
    const compact = n === 12 && civil(+s.slice(0, 4), +s.slice(4, 6), +s.slice(6, 8),
      +s.slice(8, 10), +s.slice(10, 12)) !== null && +s.slice(0, 4) <= YEAR_MAX;
    if (n === 8) {
      time = civil(+s.slice(0, 4), +s.slice(4, 6), +s.slice(6, 8));
      hasTime = false;
    } else if (sub !== undefined && !compact) {
      time = Number(BigInt(s) / 10n ** BigInt(sub));
    }
  } else if (/^\d+[.eE]/.test(s)) {
    time = epochDecimal(s);
  } else {
    const m = DATE_TIME.exec(s);
    if (m) {
      const [, y, , mo, d, h, mi, sec = '0'] = m;
      hasTime = h !== undefined;
      time = hasTime ? civil(+y, +mo, +d, +h, +mi, +sec) : civil(+y, +mo, +d);
    }
  }
  if (time === null || !(time >= T_MIN && time < T_END)) return null;
  return { time, hasTime };
}

/** A stamp as the chart's UTCTimestamp; throws naming the stamp when it cannot be read. */
export function toChartTime(ts) {
  const p = parseTimestamp(ts);
  if (!p) throw new Error(`unexpected timestamp '${ts}'`);
  return p.time;
}
