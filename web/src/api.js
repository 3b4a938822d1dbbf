// The page's calls to `kronos serve`: same origin only (the page is served by it), JSON in and
// out, errors turned into Error objects carrying the server's message and status.
//   - Every call has a deadline (AbortController): an analysis a bit over the server's default
//     request_timeout_s (120 s), the small GETs less; a call past it fails with a clear message
//     instead of leaving the page waiting for ever.
//   - 429 and 503 with Retry-After (queue full, memory budget, lock wait) are retried once by
//     themselves when the wait is short, else fail with a "busy, retry in N s" message.
//   - A call that cannot reach the server, then one that can (a restart), fires onReconnect.
//   - A caller's AbortSignal (the page's Cancel button, a newer action) ends a call at once,
//     its wait for a retry too, with an ApiError of kind 'cancelled'; the server cancels the
//     work when the connection closes (docs/api.md).
//   - A streamed batch analysis (Server-Sent Events over fetch, sse.js) has a deadline on
//     silence instead: the server sends a keep-alive every 15 s, so no byte for a minute means
//     it is gone, however long the whole batch takes.

import { seriesKey } from './routing.js';
import { SseParser } from './sse.js';

const settings = {
  analyzeTimeoutMs: 130_000,
  getTimeoutMs: 30_000,
  streamIdleTimeoutMs: 60_000, // a stream's longest silence (keep-alives every 15 s)
  metricsTimeoutMs: 10_000,
  autoRetryMaxS: 10, // retry a busy answer by itself only when told to wait at most this long
};

/** Changes the deadlines or the automatic retry limit (tests use short ones). */
export function configure(options) {
  Object.assign(settings, options);
}

const storage = globalThis.sessionStorage || null;
let apiKey = (storage && storage.getItem('kronos-api-key')) || '';

/** Uses `key` as the bearer token for /v1 calls from now on (kept for this tab only). */
export function setApiKey(key) {
  apiKey = key;
  if (!storage) return;
  if (key) storage.setItem('kronos-api-key', key);
  else storage.removeItem('kronos-api-key');
}

export const hasApiKey = () => apiKey !== '';

export class ApiError extends Error {
  /**
   * kind: 'http' (an answer), 'network' (no connection), 'timeout' (no answer in time),
   * 'cancelled' (the caller's signal aborted it).
   */
  constructor(status, message, { field, kind = 'http', retryAfter = null } = {}) {
    super(message);
    this.status = status;
    this.field = field;
    this.kind = kind;
    this.retryAfter = retryAfter;
  }
}

/** A Retry-After value (delta-seconds or an HTTP date) in whole seconds, or null. */
export function retryAfterSeconds(value, now = Date.now()) {
  if (value === null || value === undefined) return null;
  const s = String(value).trim();
  if (/^\d+$/.test(s)) return Number(s);
  const t = Date.parse(s);
  return Number.isFinite(t) ? Math.max(0, Math.ceil((t - now) / 1000)) : null;
}

// ------------------------------------------------------------------ reachability

let reachable = true;
const reconnectListeners = [];

/** fn() runs when the server answers again after a call could not reach it. */
export function onReconnect(fn) {
  reconnectListeners.push(fn);
}

function markReachable(ok) {
  if (!ok) {
    reachable = false;
    return;
  }
  if (reachable) return;
  reachable = true;
  for (const fn of reconnectListeners) fn();
}

// ------------------------------------------------------------------ calls

const seconds = (ms) => `${Math.round(ms / 1000)} s`;

const cancelled = () => new ApiError(0, 'cancelled', { kind: 'cancelled' });

/**
 * The ApiError for a fetch that threw: cancelled by the caller's signal, past its deadline
 * (`deadline` aborted: the message `late`), else no connection (an outage, onReconnect later).
 */
function fetchError(e, signal, deadline, late) {
  if (signal && signal.aborted) return cancelled();
  if (deadline.aborted) return new ApiError(0, late, { kind: 'timeout' });
  markReachable(false);
  return new ApiError(0, `cannot reach the server (${e.message})`, { kind: 'network' });
}

/** One request under a deadline: {res, text}, or an ApiError (network, timeout, cancelled). */
async function send(method, path, { body, headers = {}, timeoutMs, signal }) {
  if (signal && signal.aborted) throw cancelled();
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), timeoutMs);
  const onAbort = () => ctl.abort();
  if (signal) signal.addEventListener('abort', onAbort);
  try {
    const res = await fetch(path, { method, headers, body, cache: 'no-store', signal: ctl.signal });
    const text = await res.text(); // the body arrives under the same deadline
    markReachable(true);
    return { res, text };
  } catch (e) {
    throw fetchError(e, signal, ctl.signal, `no answer within ${seconds(timeoutMs)}: the server may be ` +
      'overloaded or the request too large (fewer paths or a shorter horizon help); try again');
  } finally {
    clearTimeout(timer);
    if (signal) signal.removeEventListener('abort', onAbort);
  }
}

function httpError(res, text) {
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    /* not JSON: the status alone */
  }
  const err = json && json.error;
  const message = err && err.message ? err.message : `HTTP ${res.status}`;
  const wait = res.status === 429 || res.status === 503 ? retryAfterSeconds(res.headers.get('Retry-After')) : null;
  if (wait !== null) {
    return new ApiError(res.status, `the server is busy, retry in ${wait} s (${message})`,
      { field: err && err.field, retryAfter: wait });
  }
  return new ApiError(res.status, message, { field: err && err.field });
}

/** Waits ms, or throws 'cancelled' as soon as the signal aborts. */
function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal && signal.aborted) return reject(cancelled());
    const onAbort = () => {
      clearTimeout(timer);
      reject(cancelled());
    };
    const timer = setTimeout(() => {
      if (signal) signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    if (signal) signal.addEventListener('abort', onAbort, { once: true });
    return undefined;
  });
}

/**
 * A call whose answer is text: throws ApiError on a non-2xx answer. A busy answer with a short
 * Retry-After is retried once after the wait (onRetry(seconds) is told first).
 */
async function callText(method, path, { body, headers = {}, timeoutMs, onRetry, signal } = {}) {
  const h = { ...headers };
  if (apiKey && path.startsWith('/v1/')) h.Authorization = `Bearer ${apiKey}`;
  for (let attempt = 0; ; attempt++) {
    const { res, text } = await send(method, path, { body, headers: h, timeoutMs, signal });
    if (res.ok) return text;
    const err = httpError(res, text);
    if (attempt > 0 || err.retryAfter === null || err.retryAfter > settings.autoRetryMaxS) throw err;
    if (onRetry) onRetry(err.retryAfter);
    await sleep(err.retryAfter * 1000, signal);
  }
}

async function call(method, path, { body, headers = {}, timeoutMs = settings.getTimeoutMs, onRetry, signal } = {}) {
  const h = { Accept: 'application/json', ...headers };
  if (body !== undefined) h['Content-Type'] = 'application/json';
  const text = await callText(method, path, {
    body: body === undefined ? undefined : JSON.stringify(body), headers: h, timeoutMs, onRetry, signal,
  });
  try {
    return JSON.parse(text);
  } catch {
    throw new ApiError(200, 'the server answered something that is not JSON');
  }
}

export const getModels = () => call('GET', '/v1/models');
export const getSymbols = () => call('GET', '/v1/symbols');

/** The newest `limit` stored candles of a symbol (rows of arrays, see docs/api.md). */
export function getCandles(symbol, { interval, limit, signal } = {}) {
  const q = new URLSearchParams();
  if (interval) q.set('interval', interval);
  if (limit) q.set('limit', String(limit));
  return call('GET', `/v1/candles/${encodeURIComponent(symbol)}?${q}`, { signal });
}

/**
 * POST /v1/analyze; returns the report set JSON (docs/report.md). onRetry: see callText;
 * signal: an AbortSignal that cancels the call.
 */
export function analyze(request, { onRetry, signal } = {}) {
  // Replicas behind HAProxy: the same series goes to the same replica (its prefix cache).
  const key = seriesKey(request);
  return call('POST', '/v1/analyze', {
    body: { ...request, format: 'json' },
    headers: key ? { 'X-Kronos-Series': key } : {},
    timeoutMs: settings.analyzeTimeoutMs,
    onRetry,
    signal,
  });
}

/** GET /metrics as text (the panel parses it). */
export function getMetricsText() {
  return callText('GET', '/metrics', { timeoutMs: settings.metricsTimeoutMs });
}

// ------------------------------------------------------------------ streams

/**
 * Reads an event stream's body: onProgress(data) for each `progress` event; resolves with the
 * `result` event's JSON; an `error` event rejects with its ApiError (status, message, field).
 * `restart()` is called on every chunk (the silence deadline starts again).
 */
async function readEvents(res, { onProgress, restart }) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  const parser = new SseParser();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      restart();
      const events = done ? parser.push(decoder.decode()).concat(parser.end()) : parser.push(decoder.decode(value, { stream: true }));
      for (const ev of events) {
        let data;
        try {
          data = JSON.parse(ev.data);
        } catch {
          throw new ApiError(200, `the server sent a '${ev.event}' event that is not JSON`);
        }
        if (ev.event === 'progress') {
          if (onProgress) onProgress(data);
        } else if (ev.event === 'result') {
          return data;
        } else if (ev.event === 'error') {
          const e = (data && data.error) || {};
          throw new ApiError(e.code || 500, e.message || 'the analysis failed', { field: e.field });
        }
      }
      if (done) throw new ApiError(0, 'the server closed the stream before the result', { kind: 'network' });
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

/**
 * POST `path` with a JSON body asking for Server-Sent Events (`"stream": true`); resolves with
 * the `result` event's JSON. onProgress(event data) for each progress event; a busy answer is
 * retried once as by callText; signal cancels. The deadline is the stream's silence
 * (settings.streamIdleTimeoutMs), not its length.
 */
async function callStream(path, body, { headers = {}, onProgress, onRetry, signal } = {}) {
  // body undefined: a GET of an existing stream (a backtest job's events).
  const h = { Accept: 'text/event-stream', ...headers };
  if (body !== undefined) h['Content-Type'] = 'application/json';
  if (apiKey) h.Authorization = `Bearer ${apiKey}`;
  const method = body === undefined ? 'GET' : 'POST';
  const text = body === undefined ? undefined : JSON.stringify({ ...body, stream: true });
  for (let attempt = 0; ; attempt++) {
    if (signal && signal.aborted) throw cancelled();
    const ctl = new AbortController();
    let timer = null;
    const restart = () => {
      clearTimeout(timer);
      timer = setTimeout(() => ctl.abort(), settings.streamIdleTimeoutMs);
    };
    const onAbort = () => ctl.abort();
    if (signal) signal.addEventListener('abort', onAbort);
    let err;
    try {
      restart();
      const res = await fetch(path, { method, headers: h, body: text, cache: 'no-store', signal: ctl.signal });
      markReachable(true);
      if (res.ok) return await readEvents(res, { onProgress, restart });
      err = httpError(res, await res.text());
    } catch (e) {
      if (e instanceof ApiError && !(signal && signal.aborted)) throw e;
      throw fetchError(e, signal, ctl.signal, `the server sent nothing for ${seconds(settings.streamIdleTimeoutMs)}: ` +
        'it may be overloaded or gone; try again');
    } finally {
      clearTimeout(timer);
      if (signal) signal.removeEventListener('abort', onAbort);
    }
    if (attempt > 0 || err.retryAfter === null || err.retryAfter > settings.autoRetryMaxS) throw err;
    if (onRetry) onRetry(err.retryAfter);
    await sleep(err.retryAfter * 1000, signal);
  }
}

/**
 * POST /v1/analyze/batch as a stream (docs/api.md): `request` names `symbols` (and one
 * `interval`); onProgress({phase, step, steps, symbol?, message}) as the server works; resolves
 * with the report set (`reports`, `ranking`, `failures`). A batch none of whose symbols could be
 * analysed rejects with the server's 400 (field "symbols[0]").
 */
export function analyzeBatch(request, { onProgress, onRetry, signal } = {}) {
  const key = seriesKey(request);
  return callStream('/v1/analyze/batch', { ...request, format: 'json' }, {
    headers: key ? { 'X-Kronos-Series': key } : {},
    onProgress,
    onRetry,
    signal,
  });
}

// ------------------------------------------------------------------ backtests

/**
 * POST /v1/backtest: starts a rolling backtest job (docs/api.md); resolves with its status
 * ({id, state, progress, status_url, events_url, result_url}).
 */
export function startBacktest(request, { onRetry, signal } = {}) {
  return call('POST', '/v1/backtest', { body: request, onRetry, signal });
}

/**
 * Follows a job's events until it ends: onProgress(status) as it moves; resolves with the
 * final status (state "done"); a failed or cancelled job rejects with its error. The deadline
 * is the stream's silence, as for a streamed batch.
 */
export function followBacktest(eventsUrl, { onProgress, signal } = {}) {
  return callStream(eventsUrl, undefined, { onProgress, signal });
}

/** The finished job's report: JSON (format 'json') or text ('html', 'md', 'csv'). */
export function backtestResult(resultUrl, format = 'json', { signal } = {}) {
  const path = `${resultUrl}?format=${encodeURIComponent(format)}`;
  if (format === 'json') return call('GET', path, { signal });
  return callText('GET', path, { timeoutMs: settings.getTimeoutMs, signal });
}

/** DELETE a job: cancels it while it runs (its forecasts stop), forgets it once finished. */
export function deleteBacktest(statusUrl) {
  return call('DELETE', statusUrl);
}
