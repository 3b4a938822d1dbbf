// Number and time formatting for the page. Pure functions (no DOM), so tests/web/unit.test.mjs
// checks them under node. Missing figures (null in the report JSON: "cannot be computed") read
// "n/a", as in the Markdown and HTML reports. A value that rounds to zero is written without a
// sign ("0.00%", never "-0.00%"), and a rounding that reaches the next unit moves to it
// (999999 -> "1.00M", 0.99996 s -> "1.00 s").

export { toChartTime } from './timestamps.js';

const NA = 'n/a';

export const isNum = (x) => typeof x === 'number' && Number.isFinite(x);

/**
 * x with `digits` decimals as the reports' printf writes it, without the sign of a value that
 * rounds to zero ("-0.00" -> "0.00"). An exact half rounds to even, as printf does and
 * toFixed does not (0.125 of 8 paths: "12%" in the summary, "13%" on a card before).
 */
export function fixed(x, digits) {
  const s = x.toFixed(digits);
  if (!Number.isFinite(x) || Math.abs(x) >= 1e21) return unsignZero(s);
  // The exact decimal expansion of the double (toFixed is exact; 100 digits hold it for any
  // value a report shows): a half only when it is "5" and zeros past the kept digits, so 2.675
  // (2.67499999… in binary) is no half, as for printf.
  const exact = Math.abs(x).toFixed(100);
  const rest = exact.slice(exact.indexOf('.') + 1 + digits);
  if (!/^50*$/.test(rest)) return unsignZero(s);
  const kept = exact.slice(0, exact.indexOf('.') + 1 + digits).replace(/\.$/, '');
  const last = Number(kept[kept.length - 1]);
  if (last % 2 === 0) return unsignZero(`${x < 0 ? '-' : ''}${kept}`); // toFixed went up: down
  return unsignZero(s); // toFixed rounded the half up, to the even digit
}

/** A probability's Monte Carlo error in percentage points, as the reports write it: "2 pp",
 *  "<1 pp" when it rounds to zero. */
export function ppSe(se) {
  return se * 100 < 0.5 ? '<1 pp' : `${fixed(se * 100, 0)} pp`;
}

// "-0", "-0.00", "-0.00%" (any formatted text whose digits are all zeros) lose the sign.
function unsignZero(s) {
  return s.startsWith('-') && !/[1-9]/.test(s) ? s.slice(1) : s;
}

/** A fraction as a percentage: 0.8125 -> "81%" (digits decimals). */
export function fracPct(x, digits = 0) {
  return isNum(x) ? `${fixed(x * 100, digits)}%` : NA;
}

/** A value already in percent (the report's *_pct keys), signed: 3.826 -> "+3.83%". */
export function signedPct(x, digits = 2) {
  if (!isNum(x)) return NA;
  const s = fixed(x, digits);
  return `${x > 0 && Number(s) !== 0 ? '+' : ''}${s}%`;
}

/** A value already in percent, unsigned: 3.77 -> "3.77%". */
export function pct(x, digits = 2) {
  return isNum(x) ? `${fixed(x, digits)}%` : NA;
}

/** Decimals a price is written with: 2; below 1, 4 significant digits so small coins keep theirs. */
export function priceDigits(x) {
  const a = Math.abs(x);
  return a >= 1 || a === 0 ? 2 : Math.min(12, 3 - Math.floor(Math.log10(a)));
}

/** A price: 2 decimals; below 1, up to 4 significant digits. */
export function price(x) {
  if (!isNum(x)) return NA;
  const s = x.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: priceDigits(x) });
  return unsignZero(s);
}

/**
 * A price's Monte Carlo error at the price's decimals, as the reports print it: "± 2.12",
 * "± <0.01" when it rounds to zero; null when there is none (one path, an older server).
 * A price of exactly 0 (paths that crashed to nothing) sets no scale: the error then gets two
 * significant digits of its own, so a coin's ± 0.0000021 is not shown as "± <0.01".
 */
export function priceSe(se, ref) {
  if (!isNum(se)) return null;
  const ownDigits = se > 0 ? Math.min(12, Math.max(2, 1 - Math.floor(Math.log10(se)))) : 2;
  const d = isNum(ref) && ref !== 0 ? priceDigits(ref) : ownDigits;
  return se < 0.5 * 10 ** -d ? `± <${(10 ** -d).toFixed(d)}` : `± ${se.toFixed(d)}`;
}

/** A plain number with fixed decimals. */
export function num(x, digits = 2) {
  return isNum(x) ? fixed(x, digits) : NA;
}

const UNITS = [[1, '', 0], [1e3, 'k', 2], [1e6, 'M', 2], [1e9, 'B', 2], [1e12, 'T', 2]];

/** Large counts compactly: 63956460 -> "63.96M", 999999 -> "1.00M", 999.6 -> "1.00k". */
export function compact(x) {
  if (!isNum(x)) return NA;
  const a = Math.abs(x);
  let u = UNITS.length - 1;
  while (u > 0 && a < UNITS[u][0]) u--;
  // Rounding may reach 1000 of this unit: then it is 1.00 of the next one.
  while (u < UNITS.length - 1 && Math.abs(Number((x / UNITS[u][0]).toFixed(UNITS[u][2]))) >= 1000) u++;
  const [div, unit, digits] = UNITS[u];
  return `${fixed(x / div, digits)}${unit}`;
}

/** Seconds as a short duration: 0.0577 -> "57.7 ms", 2.5 -> "2.50 s". */
export function duration(s) {
  if (!isNum(s)) return '–';
  const us = Math.abs(Number((s * 1e6).toFixed(0)));
  if (us < 1000) return `${fixed(s * 1e6, 0)} µs`;
  const ms = Math.abs(Number((s * 1e3).toFixed(1)));
  if (ms < 1000) return `${fixed(s * 1e3, 1)} ms`;
  return `${fixed(s, 2)} s`;
}

/** Symbol names the store accepts (market/store.h): 1..32 of [A-Za-z0-9._-^=]. */
export function isSymbol(s) {
  return typeof s === 'string' && /^[A-Za-z0-9._\-^=]{1,32}$/.test(s);
}
