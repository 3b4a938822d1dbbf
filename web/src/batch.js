// Batch analysis of several stored series (POST /v1/analyze/batch, docs/api.md): which series
// a batch takes, the requests it needs, the progress line of its stream, and the ranking table's
// rows and their sort. Pure (no DOM), so tests/web/unit.test.mjs checks it under node.
//
// One request names symbols and at most one interval (it applies to every symbol), and its
// symbols are distinct without case; a pick of series with several intervals (AAPL 1d and
// AAPL 1h) is therefore one request per interval, run one after the other. The server ranks
// within each interval anyway (horizons in bars of different lengths are not comparable).

import { fracPct, isNum, pct, ppSe, signedPct } from './format.js';

/**
 * The series a batch takes: the ticked ones (their keys "SYMBOL\tINTERVAL"), else every one the
 * list shows (the filter respected). items: GET /v1/symbols' data; shown: indices into items.
 */
export function batchSeries(items, shown, ticked) {
  if (ticked && ticked.size) return items.filter((s) => ticked.has(seriesId(s)));
  return shown.map((i) => items[i]);
}

/** The Batch button's words: what it would analyse. */
export function batchLabel(nTicked, nShown) {
  if (nTicked > 0) return `Analyse ${nTicked} ticked`;
  return nShown === 1 ? 'Analyse the 1 shown' : `Analyse all ${nShown} shown`;
}

/** A stored series' key: symbol and interval. */
export const seriesId = (s) => `${s.symbol}\t${s.interval}`;

const UNIT_S = { s: 1, m: 60, min: 60, h: 3600, d: 86400, w: 604800, mo: 2629800 };

/** Seconds per bar of an interval name ("5m" -> 300, "1d" -> 86400); Infinity when unknown. */
export function intervalSeconds(interval) {
  const m = /^(\d+)(s|m|min|h|d|w|mo)$/.exec(String(interval));
  return m ? Number(m[1]) * UNIT_S[m[2]] : Infinity;
}

/**
 * The requests of a batch: [{interval, symbols}], shortest bars first (as the server orders its
 * ranking); a symbol whose name differs only in case from one already in a request goes into
 * another request of the same interval (a request's symbols are distinct without case).
 */
export function batchGroups(series) {
  const byInterval = new Map();
  for (const s of series) {
    if (!byInterval.has(s.interval)) byInterval.set(s.interval, []);
    const groups = byInterval.get(s.interval);
    const key = s.symbol.toLowerCase();
    let g = groups.find((x) => !x.keys.has(key));
    if (!g) {
      g = { interval: s.interval, symbols: [], keys: new Set() };
      groups.push(g);
    }
    g.symbols.push(s.symbol);
    g.keys.add(key);
  }
  const intervals = [...byInterval.keys()].sort((a, b) =>
    intervalSeconds(a) - intervalSeconds(b) || (a < b ? -1 : a > b ? 1 : 0));
  return intervals.flatMap((iv) => byInterval.get(iv).map(({ interval, symbols }) => ({ interval, symbols })));
}

/**
 * The progress line and bar of a stream's `progress` event (docs/api.md: phase, step, steps,
 * symbol?, message), in request `part` (1-based) of `parts`: {text, value, max}. The bar runs
 * over all the requests: each takes an equal share.
 */
export function progressView(ev, part = 1, parts = 1) {
  const steps = isNum(ev.steps) && ev.steps > 0 ? ev.steps : 1;
  const step = isNum(ev.step) ? Math.min(Math.max(ev.step, 0), steps) : 0;
  const head = parts > 1 ? `Request ${part} of ${parts} · ` : '';
  const who = ev.symbol ? ` · ${ev.symbol}` : '';
  return {
    text: `${head}step ${step} of ${steps}${who}: ${ev.message || ev.phase || ''}`,
    value: (part - 1) + step / steps,
    max: parts,
    symbol: ev.symbol || null,
  };
}

/**
 * The ranking table's rows from one batch answer (a report set with `ranking`, `reports` and
 * `failures`, docs/report.md): one per ranked series with its key figures and its report, then
 * one per failure with its error. `order` numbers the rows across several answers (the
 * default sort: the server's order, answer after answer).
 */
export function rankingRows(set, order = 0) {
  const reports = set.reports || [];
  const rows = (set.ranking || []).map((x, i) => {
    const rep = reports.find((r) => r.symbol === x.symbol && r.interval === x.interval) || null;
    const st = (rep && rep.statistics) || {};
    const se = x.standard_error || {};
    return {
      key: `${x.symbol}\t${x.interval}`,
      order: order + i,
      symbol: x.symbol,
      interval: x.interval,
      rank: x.group_rank ?? x.rank,
      probUp: x.prob_up ?? null,
      probUpSe: se.prob_up ?? null,
      expectedReturn: x.expected_return_pct ?? null,
      expectedReturnSe: se.expected_return_pct ?? null,
      returnP10: st.return_p10_pct ?? null,
      returnP90: st.return_p90_pct ?? null,
      var95: x.var95_pct ?? null,
      es95: x.es95_pct ?? null,
      lastTimestamp: x.last_timestamp ?? null,
      stale: !!x.stale,
      tiedWith: x.indistinguishable_from || [],
      report: rep,
      error: null,
    };
  });
  const failed = (set.failures || []).map((f, i) => failedRow(f.symbol, f.interval, f.error, order + rows.length + i));
  return [...rows, ...failed];
}

/** A row for a series that got no report: its error instead of figures. */
export function failedRow(symbol, interval, error, order = 0) {
  return {
    key: `${symbol}\t${interval || ''}`, order, symbol, interval: interval || '', rank: null,
    probUp: null, probUpSe: null, expectedReturn: null, expectedReturnSe: null, returnP10: null,
    returnP90: null, var95: null, es95: null, lastTimestamp: null, stale: false, tiedWith: [],
    report: null, error: String(error),
  };
}

// The sortable columns: the value each sorts by; "rank" is the server's order.
const SORT_KEYS = {
  rank: (r) => r.order,
  symbol: (r) => r.symbol.toLowerCase(),
  probUp: (r) => r.probUp,
  expectedReturn: (r) => r.expectedReturn,
  var95: (r) => r.var95,
};

export const SORTABLE = Object.keys(SORT_KEYS);

/**
 * The rows sorted by a column ('rank', 'symbol', 'probUp', 'expectedReturn', 'var95'),
 * 'asc' or 'desc'. Whatever the direction, rows with an error come last, and so do missing
 * figures ("n/a"); ties keep the server's order. Returns a new array.
 */
export function sortRows(rows, key, dir = 'asc') {
  const get = SORT_KEYS[key] || SORT_KEYS.rank;
  const sign = dir === 'desc' ? -1 : 1;
  return [...rows].sort((a, b) => {
    if (!!a.error !== !!b.error) return a.error ? 1 : -1;
    const x = get(a);
    const y = get(b);
    const xm = x === null || x === undefined || (typeof x === 'number' && !Number.isFinite(x));
    const ym = y === null || y === undefined || (typeof y === 'number' && !Number.isFinite(y));
    if (xm !== ym) return xm ? 1 : -1;
    if (!xm && x !== y) return (x < y ? -1 : 1) * sign;
    return a.order - b.order;
  });
}

/** The direction a click on a column's header gives: the other one on the sorted column, else
 * the column's natural one (best first: high P(up) and return, low risk; A to Z; rank 1 up). */
export function nextSort(current, key) {
  if (current && current.key === key) return { key, dir: current.dir === 'asc' ? 'desc' : 'asc' };
  return { key, dir: key === 'probUp' || key === 'expectedReturn' ? 'desc' : 'asc' };
}

/** A row's figures as text, each with its uncertainty: {probUp, expectedReturn, band, risk}. */
export function rowTexts(r) {
  if (r.error) return null;
  const pp = isNum(r.probUpSe) ? ` ± ${ppSe(r.probUpSe)}` : '';
  const er = isNum(r.expectedReturnSe) ? ` ± ${pct(r.expectedReturnSe)}` : '';
  return {
    probUp: `${fracPct(r.probUp)}${isNum(r.probUp) ? pp : ''}`,
    expectedReturn: `${signedPct(r.expectedReturn)}${isNum(r.expectedReturn) ? er : ''}`,
    band: isNum(r.returnP10) || isNum(r.returnP90) ? `p10–p90 ${signedPct(r.returnP10)} to ${signedPct(r.returnP90)}` : '',
    risk: `VaR ${pct(r.var95)} · ES ${pct(r.es95)}`,
  };
}
