// The live metrics panel's arithmetic: the Prometheus text format (0.0.4) that GET /metrics
// serves, parsed into samples, and the few figures the panel shows. Pure (no DOM, no fetch), so
// tests/web/unit.test.mjs runs it under node against a real scrape's shape.

/**
 * Parses exposition text into samples: [{name, labels: {k: v}, value}]. Comments, blank lines
 * and malformed lines are skipped: a panel should show what it can, not fail on one odd line.
 */
export function parsePrometheus(text) {
  const samples = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const m = /^([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?$/.exec(line);
    if (!m) continue;
    const value = parseValue(m[4]);
    if (value === undefined) continue;
    samples.push({ name: m[1], labels: m[3] ? parseLabels(m[3]) : {}, value });
  }
  return samples;
}

function parseValue(s) {
  if (s === '+Inf') return Infinity;
  if (s === '-Inf') return -Infinity;
  if (s === 'NaN') return NaN;
  const v = Number(s);
  return Number.isNaN(v) ? undefined : v;
}

// label="value" pairs; values may contain escaped quotes, backslashes and newlines.
function parseLabels(body) {
  const labels = {};
  const re = /([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?/g;
  let m;
  while ((m = re.exec(body)) !== null) {
    labels[m[1]] = m[2].replace(/\\(["\\n])/g, (_, c) => (c === 'n' ? '\n' : c));
  }
  return labels;
}

/** The value of the first sample named `name` (whose labels include `match`), else null. */
export function value(samples, name, match = {}) {
  const s = samples.find((x) => x.name === name &&
    Object.entries(match).every(([k, v]) => x.labels[k] === v));
  return s ? s.value : null;
}

/** The sum over every sample named `name` (a counter split by labels), else null. */
export function sum(samples, name) {
  const xs = samples.filter((x) => x.name === name);
  return xs.length ? xs.reduce((a, x) => a + x.value, 0) : null;
}

/**
 * The q-quantile of a histogram, as Prometheus' histogram_quantile() estimates it: find the
 * bucket holding rank q·count and interpolate linearly inside it (from 0 for the first bucket).
 * Returns null without observations; the largest finite bound when the rank falls in +Inf.
 */
export function histogramQuantile(samples, name, q) {
  const buckets = samples
    .filter((x) => x.name === `${name}_bucket` && 'le' in x.labels)
    .map((x) => ({ le: parseValue(x.labels.le), count: x.value }))
    .filter((b) => b.le !== undefined)
    .sort((a, b) => a.le - b.le);
  if (buckets.length === 0) return null;
  const total = buckets[buckets.length - 1].count;
  if (!(total > 0)) return null;
  const rank = q * total;
  let prevLe = 0;
  let prevCount = 0;
  for (const b of buckets) {
    if (b.count >= rank) {
      if (b.le === Infinity) return prevLe;
      const inBucket = b.count - prevCount;
      return inBucket > 0 ? prevLe + (b.le - prevLe) * ((rank - prevCount) / inBucket) : b.le;
    }
    prevLe = b.le;
    prevCount = b.count;
  }
  return prevLe;
}

/**
 * The panel's figures from one scrape. Each is null when the server has not measured it yet
 * (no forecast has run: no TTFT; nothing looked up: no hit rate).
 */
export function summarize(samples) {
  const queried = value(samples, 'kronos_prefix_cache_queried_tokens_total');
  const hits = value(samples, 'kronos_prefix_cache_hit_tokens_total');
  let kv = value(samples, 'kronos_kv_cache_usage_ratio');
  if (kv === null) {
    const used = value(samples, 'kronos_kv_cache_used_bytes');
    const budget = value(samples, 'kronos_kv_cache_budget_bytes');
    kv = used !== null && budget > 0 ? used / budget : null;
  }
  return {
    running: value(samples, 'kronos_requests_running'),
    waiting: value(samples, 'kronos_requests_waiting'),
    ttftP50: histogramQuantile(samples, 'kronos_time_to_first_step_seconds', 0.5),
    kvUsage: kv,
    kvUsedBytes: value(samples, 'kronos_kv_cache_used_bytes'),
    prefixHitRate: queried > 0 && hits !== null ? hits / queried : null,
    httpRequests: sum(samples, 'kronos_http_requests_total'),
  };
}
