// The report's key figures and technicals as text, from one report of /v1/analyze (docs/report.md).
// Pure (no DOM), so tests/web/unit.test.mjs checks them under node. Every figure the report may
// leave null ("cannot be computed") reads "n/a" — never a stand-in such as the last close.

import { compact, fracPct, isNum, num, pct, ppSe, price, priceSe, signedPct } from './format.js';

/** The price `retPct` percent away from `last`, or null when either is missing. */
export function priceAtReturn(last, retPct) {
  return isNum(last) && isNum(retPct) ? last * (1 + retPct / 100) : null;
}

const tone = (x) => (!isNum(x) ? '' : x > 0 ? 'up' : x < 0 ? 'down' : '');

/**
 * Whether a share p of n paths is a lean, by the summary's rule (src/analyst/summary.c):
 * p >= 0.6 and the Agresti-Coull centre (k + 2) / (n + 4), whose standard error se is, two
 * errors clear of a half. So a card is coloured exactly when the summary says "leans".
 */
export function leans(p, se, n) {
  if (!isNum(p) || !isNum(se) || !isNum(n)) return false;
  return p >= 0.6 && (p * n + 2) / (n + 4) - 2 * se > 0.5;
}

/**
 * The Monte Carlo errors of the horizon band's ends (forecast.steps[h].standard_error.p10 /
 * .p90 close, as the reports print them): "0.61 / ± 0.67" (the card prefixes "± "), or null
 * when the report has none (fewer than 8 paths, an older server).
 */
export function bandSe(r, lo, hi) {
  const steps = (r.forecast && r.forecast.steps) || [];
  const e = (steps.length && steps[steps.length - 1].standard_error) || {};
  const a = priceSe(e.p10 && e.p10.close, lo);
  const b = priceSe(e.p90 && e.p90.close, hi);
  return a === null || b === null ? null : `${a.replace(/^± /, '')} / ${b}`;
}

/**
 * The cards: [{label, value, se, sub, tone, id?, valueId?, hero?}] — value the headline figure,
 * se its Monte Carlo error (null when there is none), sub the small line under it.
 */
export function cardFigures(r) {
  const s = r.statistics || {};
  const e = s.standard_error || {};
  const dd = s.max_drawdown_pct || {};
  const last = r.last.close;
  const lo = priceAtReturn(last, s.return_p10_pct);
  const hi = priceAtReturn(last, s.return_p90_pct);
  const n = r.forecast.paths;
  const probTone = leans(s.prob_up, e.prob_up, n) ? 'up' : leans(s.prob_down, e.prob_down, n) ? 'down' : '';
  const edd = e.max_drawdown_pct || {};
  return [
    {
      id: 'prob-up-card', valueId: 'prob-up', hero: true, label: 'Probability up',
      value: fracPct(s.prob_up),
      se: isNum(e.prob_up) ? ppSe(e.prob_up) : null,
      sub: `of ${r.forecast.paths} paths close above ${price(last)} after ${r.forecast.horizon} bars`,
      tone: probTone,
    },
    {
      label: 'Expected return', value: signedPct(s.expected_return_pct),
      se: isNum(e.expected_return_pct) ? pct(e.expected_return_pct) : null,
      sub: `σ ${pct(s.return_std_pct)} · close ${price(s.expected_close)}`, tone: tone(s.expected_return_pct),
    },
    {
      label: 'p10 – p90 band', value: lo === null && hi === null ? 'n/a' : `${price(lo)} – ${price(hi)}`,
      se: lo === null || hi === null ? null : bandSe(r, lo, hi),
      sub: `${signedPct(s.return_p10_pct)} to ${signedPct(s.return_p90_pct)} at the horizon`, tone: '',
    },
    {
      label: 'VaR 95 / ES 95', value: `${pct(s.var95_pct)} / ${pct(s.es95_pct)}`,
      se: isNum(e.var95_pct) ? pct(e.var95_pct) : null,
      sub: 'loss at the 5% tail, positive = loss; ± VaR error', tone: 'risk',
    },
    {
      // The median of the paths' drawdowns (docs/report.md), not the median path's drawdown.
      label: 'Max drawdown', value: pct(dd.p50), se: isNum(edd.p50) ? pct(edd.p50) : null,
      sub: `median over the paths · p90 ${pct(dd.p90)}`, tone: '',
    },
    {
      label: 'Volatility per bar', value: pct(s.forecast_volatility_pct),
      se: isNum(e.forecast_volatility_pct) ? pct(e.forecast_volatility_pct) : null,
      sub: `forecast vs ${pct(s.realized_volatility_pct)} realised · ${fracPct(s.prob_volatility_above_realized)} of paths above`,
      tone: '',
    },
  ];
}

/** The technicals table: [[name, text]]. */
export function technicalRows(t) {
  const macd = t.macd || {};
  const boll = t.bollinger || {};
  const vol = t.volume || {};
  const rv = t.realized_volatility || {};
  return [
    ['RSI 14', isNum(t.rsi_14) ? `${num(t.rsi_14, 1)} (${t.rsi_state})` : 'n/a'],
    ['Close', price(t.close)],
    ['SMA 20 / 60', `${price(t.sma_20)} / ${price(t.sma_60)}`],
    ['EMA 20 / 60', `${price(t.ema_20)} / ${price(t.ema_60)}`],
    ['MACD histogram', num(macd.histogram, 3)],
    ['Bollinger %b', num(boll.percent_b, 2)],
    ['ATR 14', isNum(t.atr_14) ? `${price(t.atr_14)} (${pct(t.atr_14_pct)})` : 'n/a'],
    ['Volume 5/20', vol.available && isNum(vol.ratio_5_20) ? `${num(vol.ratio_5_20, 2)} (avg ${compact(vol.avg_5)})` : 'n/a'],
    ['Realised vol (ann.)', pct(rv.annualized_pct, 1)],
  ];
}
