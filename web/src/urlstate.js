// The analysis in the address bar: #symbol=AAPL&interval=1d&horizon=20. Back, forward and
// reload bring the same analysis back. Pure (no DOM), so tests/web/unit.test.mjs checks it.

import { isSymbol } from './format.js';

// As the store takes them (kr_store_interval_seconds): a count of 1..100000 and a unit.
const INTERVAL = /^([1-9]\d{0,5})(s|m|min|h|d|w|mo)$/;
const isInterval = (s) => {
  const m = INTERVAL.exec(s);
  return !!m && Number(m[1]) <= 100000;
};
const MAX_HORIZON = 256;

/** {symbol, interval?, horizon?} -> "#symbol=…&interval=…&horizon=…". */
export function encodeState({ symbol, interval, horizon }) {
  const q = new URLSearchParams();
  q.set('symbol', symbol);
  if (interval) q.set('interval', interval);
  if (Number.isInteger(horizon)) q.set('horizon', String(horizon));
  return `#${q}`;
}

/** A location hash -> {symbol, interval, horizon} (absent parts null), or null when it names no valid symbol. */
export function decodeState(hash) {
  const q = new URLSearchParams(String(hash || '').replace(/^#/, ''));
  const symbol = q.get('symbol');
  if (!isSymbol(symbol)) return null;
  const interval = q.get('interval');
  const h = q.get('horizon');
  const horizon = h !== null && /^\d+$/.test(h) ? Number(h) : null;
  return {
    symbol,
    interval: interval !== null && isInterval(interval) ? interval : null,
    horizon: horizon !== null && horizon >= 1 && horizon <= MAX_HORIZON ? horizon : null,
  };
}

/** Two states name the same analysis. */
export function sameState(a, b) {
  return !!a && !!b && a.symbol === b.symbol && (a.interval || null) === (b.interval || null) &&
    (a.horizon ?? null) === (b.horizon ?? null);
}
