// A fetched history pinned to the bar a report was made at. GET /v1/candles returns the newest
// stored rows, so a candle stored between POST /v1/analyze and that GET would otherwise become
// the chart's last bar and the forecast would grow out of the wrong close. Pure (no DOM).

import { parseTimestamp } from './timestamps.js';

/** `history` (GET /v1/candles' shape) without the rows after `lastTimestamp` (the report's). */
export function historyUpTo(history, lastTimestamp) {
  const cut = parseTimestamp(lastTimestamp);
  const ti = history.columns.indexOf('timestamps');
  if (!cut || ti < 0) return history;
  let n = history.candles.length;
  while (n > 0) {
    const p = parseTimestamp(history.candles[n - 1][ti]);
    if (p && p.time <= cut.time) break;
    n--;
  }
  if (n === history.candles.length) return history;
  const candles = history.candles.slice(0, n);
  return { ...history, candles, rows: candles.length };
}
