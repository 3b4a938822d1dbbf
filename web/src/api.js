// The page's calls to `kronos serve`: same origin only (the page is served by it), JSON in and
// out, errors turned into Error objects carrying the server's message and status.

import { seriesKey } from './routing.js';

let apiKey = sessionStorage.getItem('kronos-api-key') || '';

/** Uses `key` as the bearer token for /v1 calls from now on (kept for this tab only). */
export function setApiKey(key) {
  apiKey = key;
  if (key) sessionStorage.setItem('kronos-api-key', key);
  else sessionStorage.removeItem('kronos-api-key');
}

export class ApiError extends Error {
  constructor(status, message, field) {
    super(message);
    this.status = status;
    this.field = field;
  }
}

async function call(method, path, body, extraHeaders = {}) {
  const headers = { Accept: 'application/json', ...extraHeaders };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (apiKey && path.startsWith('/v1/')) headers.Authorization = `Bearer ${apiKey}`;
  let res;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store',
    });
  } catch (e) {
    throw new ApiError(0, `cannot reach the server (${e.message})`);
  }
  const text = await res.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    /* not JSON: reported below */
  }
  if (!res.ok) {
    const err = json && json.error;
    throw new ApiError(res.status, err ? err.message : `HTTP ${res.status}`, err && err.field);
  }
  if (json === null) throw new ApiError(res.status, 'the server answered something that is not JSON');
  return json;
}

export const getModels = () => call('GET', '/v1/models');
export const getSymbols = () => call('GET', '/v1/symbols');

/** The newest `limit` stored candles of a symbol (rows of arrays, see docs/api.md). */
export function getCandles(symbol, { interval, limit } = {}) {
  const q = new URLSearchParams();
  if (interval) q.set('interval', interval);
  if (limit) q.set('limit', String(limit));
  return call('GET', `/v1/candles/${encodeURIComponent(symbol)}?${q}`);
}

/** POST /v1/analyze; returns the report set JSON (docs/report.md). */
export const analyze = (request) => {
  // Replicas behind HAProxy: the same series goes to the same replica (its prefix cache).
  const key = seriesKey(request);
  return call('POST', '/v1/analyze', { ...request, format: 'json' }, key ? { 'X-Kronos-Series': key } : {});
};

/** GET /metrics as text (the panel parses it). */
export async function getMetricsText() {
  const res = await fetch('/metrics', { cache: 'no-store' });
  if (!res.ok) throw new ApiError(res.status, `HTTP ${res.status}`);
  return res.text();
}
