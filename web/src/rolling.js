// The rolling backtest view (POST /v1/backtest, docs/api.md and docs/backtest.md): the request
// the form makes, the progress line of the job's events, and the words of its verdicts. Pure
// (no DOM, no fetch), so tests/web/unit.test.mjs checks it under node; app.js draws it, and the
// report itself (its plots included) is the server's HTML, shown as it renders it.

/** Paths of a rolling backtest when the form leaves them to the server ("auto"). */
export const ROLLING_DEFAULT_PATHS = 32;

/**
 * The body of POST /v1/backtest from the form's fields: the series (one interval: a request
 * takes one), the horizon, an origin every `every` bars, paths (32 when the form says auto),
 * the sampling fields. Throws on a field the server would refuse anyway, naming it.
 */
export function rollingRequest({ symbols, interval, horizon, paths, every, seed, temperature, top_p: topP }) {
  if (!symbols || !symbols.length) throw new Error('pick a stored series (or tick some) for a rolling backtest');
  const int = (name, v, lo, hi) => {
    if (!Number.isInteger(v) || v < lo || v > hi) throw new Error(`${name} must be a whole number in ${lo}..${hi}`);
    return v;
  };
  const body = {
    symbols: [...symbols],
    horizon: int('horizon', horizon, 1, 256),
    every: int('origin every', every, 1, 100000),
    paths: paths === undefined || paths === null ? ROLLING_DEFAULT_PATHS : int('paths', paths, 2, 256),
  };
  if (interval) body.interval = interval;
  if (seed !== undefined) body.seed = seed;
  if (temperature !== undefined) body.temperature = temperature;
  if (topP !== undefined) body.top_p = topP;
  if (symbols.length > 1) body.strategy = { k: 1 };
  return body;
}

const PHASES = {
  queued: 'queued',
  plan: 'planning the origins',
  forecast: 'forecasting',
  score: 'scoring the baselines',
  bootstrap: 'bootstrapping the intervals',
  strategy: 'running the strategy',
  done: 'done',
};

/** Whole seconds as "42 s" or "3 min 05 s". */
function secs(s) {
  const t = Math.round(s);
  if (t < 60) return `${t} s`;
  return `${Math.floor(t / 60)} min ${String(t % 60).padStart(2, '0')} s`;
}

/**
 * A job's status (GET /v1/backtest/{id}, or an events' data) as a progress bar and its line:
 * {value, max, text}: "forecasting 340 / 1000 · 12 s · about 23 s left".
 */
export function rollingProgress(status) {
  const p = (status && status.progress) || {};
  const phase = PHASES[p.phase] || p.phase || 'starting';
  const forecasting = p.phase === 'forecast' && p.total > 0;
  const parts = [forecasting ? `${phase} ${p.done} / ${p.total}` : phase];
  if (Number.isFinite(p.elapsed_seconds)) parts.push(secs(p.elapsed_seconds));
  if (forecasting && Number.isFinite(p.eta_seconds) && p.done < p.total) parts.push(`about ${secs(p.eta_seconds)} left`);
  return {
    value: forecasting ? p.done : p.phase === 'done' ? 1 : 0,
    max: forecasting ? p.total : 1,
    text: parts.join(' · '),
  };
}

/** A verdict sentence's kind, for its colour: 'better' (beats), 'worse' (loses to) or 'ns'. */
export function verdictKind(sentence) {
  if (/ beats /.test(sentence)) return 'better';
  if (/ loses to /.test(sentence)) return 'worse';
  return 'ns';
}

/** The line under the panel's title: what was backtested, from the report's JSON. */
export function rollingSummary(report) {
  const c = report.counts;
  const p = report.parameters;
  const syms = report.symbols.map((s) => s.symbol).join(', ');
  return `${syms} · ${c.forecasts} forecasts at ${c.origins} origins · ${p.horizon} bars ahead, an origin every ${p.every} · ${p.paths} paths`;
}
