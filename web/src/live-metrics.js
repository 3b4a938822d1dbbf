// The live line under the page: the server's /metrics scraped every few seconds and shown as
// a few figures (running, waiting, time to first step, KV use, prefix hits, HTTP requests).

import * as api from './api.js';
import { $ } from './dom.js';
import { compact, duration, fracPct } from './format.js';
import { parsePrometheus, summarize } from './metrics.js';

const EVERY_MS = 2000;
let scrapes = 0;

// A share of the KV budget; a few cached blocks of a large budget still read as "in use".
function kvText(ratio) {
  if (ratio === null) return '–';
  if (ratio > 0 && ratio < 0.0001) return '<0.01%';
  return `${(ratio * 100).toFixed(ratio < 0.1 ? 2 : 1)}%`;
}

async function poll() {
  const dot = $('metrics-dot');
  try {
    const m = summarize(parsePrometheus(await api.getMetricsText()));
    scrapes += 1;
    const show = (id, text) => { $(id).textContent = text; };
    show('m-running', m.running ?? '–');
    show('m-waiting', m.waiting ?? '–');
    show('m-ttft', m.ttftP50 === null ? 'no forecasts yet' : duration(m.ttftP50));
    show('m-kv', kvText(m.kvUsage));
    $('m-kv').title = m.kvUsedBytes === null ? '' : `${compact(m.kvUsedBytes)}B of the KV budget in use`;
    show('m-prefix', m.prefixHitRate === null ? '–' : fracPct(m.prefixHitRate, 1));
    show('m-http', m.httpRequests === null ? '–' : m.httpRequests.toLocaleString('en-US'));
    $('m-updated').textContent = `updated ${new Date().toLocaleTimeString()} · scrape #${scrapes}`;
    $('m-updated').dataset.scrapes = String(scrapes);
    dot.className = 'live-dot on';
  } catch (e) {
    $('m-updated').textContent = `metrics unavailable: ${e.message}`;
    dot.className = 'live-dot off';
  } finally {
    setTimeout(poll, EVERY_MS);
  }
}

/** Starts the scrapes; a failed one shows why and the next is tried all the same. */
export function startMetricsPoll() {
  poll();
}
