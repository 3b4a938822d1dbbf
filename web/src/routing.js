// The routing key of a request, sent as X-Kronos-Series: behind HAProxy with consistent hashing
// on it (deploy/haproxy.cfg) every request about one series reaches the same replica, whose
// prefix cache still holds that series' context. The key only has to be the same each time for
// the same series: the symbol(s) when the request names them, else a hash of the first candle
// (a growing history keeps its first candle).

/** FNV-1a, 32 bits, as 8 hex digits: short, stable, and enough to spread keys. */
export function fnv1a(text) {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, '0');
}

function firstCandle(candles) {
  if (Array.isArray(candles)) return candles[0];
  if (typeof candles === 'string') return candles.split('\n', 2)[1]; // CSV: the first data row
  if (candles && typeof candles === 'object') {
    // columns: {"timestamps": [...], "open": [...], ...}
    return Object.keys(candles).sort().map((k) => (Array.isArray(candles[k]) ? candles[k][0] : null));
  }
  return undefined;
}

/** The X-Kronos-Series value for an analyze or forecast request body ('' when there is none). */
export function seriesKey(request) {
  if (!request) return '';
  if (typeof request.symbol === 'string' && request.symbol) return request.symbol.toUpperCase();
  if (Array.isArray(request.symbols) && request.symbols.length) {
    return request.symbols.map((s) => String(s).toUpperCase()).sort().join(',');
  }
  const first = firstCandle(request.candles);
  return first === undefined || first === null ? '' : `h${fnv1a(JSON.stringify(first))}`;
}
