// The page's controller: the stored-symbol list, the Analyze form, the report panels and the
// live metrics poll. Everything it shows comes from the server it was loaded from.

import * as api from './api.js';
import { PriceChart } from './chart.js';
import { compact, duration, fracPct, isSymbol, num, pct, price, signedPct } from './format.js';
import { parsePrometheus, summarize } from './metrics.js';

const $ = (id) => document.getElementById(id);
const METRICS_EVERY_MS = 2000;
const HISTORY_BARS = 400; // bars drawn; the model itself sees up to max_context - horizon

let chart = null;
let stored = []; // GET /v1/symbols data

function setStatus(text, kind = '') {
  const el = $('status');
  el.textContent = text;
  el.className = `status ${kind}`;
}

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('data-')) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) e.append(c);
  return e;
}

// ------------------------------------------------------------------ symbols

function selectSymbol(symbol) {
  $('symbol').value = symbol;
  for (const li of $('symbol-list').children) {
    li.classList.toggle('selected', li.dataset.symbol === symbol);
  }
}

async function loadSymbols() {
  try {
    stored = (await api.getSymbols()).data;
  } catch (e) {
    if (e.status === 401) return needKey();
    setStatus(`Cannot list stored symbols: ${e.message}`, 'error');
    return;
  }
  const list = $('symbol-list');
  const options = $('symbol-options');
  list.replaceChildren();
  options.replaceChildren();
  if (stored.length === 0) {
    list.append(el('li', { class: 'empty' },
      'Nothing stored yet: kronos ingest --symbol AAPL --interval 1d AAPL.csv'));
  }
  for (const s of stored) {
    const button = el('button', { type: 'button', title: `${s.first_timestamp} → ${s.last_timestamp}` },
      el('span', { class: 'sym' }, s.symbol),
      el('span', { class: 'meta' }, `${s.interval} · ${s.rows.toLocaleString('en-US')} bars`));
    button.addEventListener('click', () => selectSymbol(s.symbol));
    button.addEventListener('dblclick', () => {
      selectSymbol(s.symbol);
      $('analyze-form').requestSubmit();
    });
    list.append(el('li', { 'data-symbol': s.symbol }, button));
    options.append(el('option', { value: s.symbol }));
  }
  if (!$('symbol').value && stored.length) selectSymbol(stored[0].symbol);
}

function needKey() {
  $('api-key-field').hidden = false;
  $('api-key').focus();
  setStatus('This server needs an API key: enter it and press Analyze.', 'error');
}

// ------------------------------------------------------------------ report panels

function card(label, value, sub, tone = '') {
  return el('div', { class: `card ${tone}` },
    el('div', { class: 'card-label' }, label),
    el('div', { class: 'card-value' }, value),
    el('div', { class: 'card-sub' }, sub));
}

function renderCards(r) {
  const s = r.statistics;
  const last = r.last.close;
  const h = r.forecast.horizon;
  const lo = last * (1 + s.return_p10_pct / 100);
  const hi = last * (1 + s.return_p90_pct / 100);
  const tone = (x) => (x > 0 ? 'up' : x < 0 ? 'down' : '');
  const probTone = s.prob_up >= 0.6 ? 'up' : s.prob_up <= 0.4 ? 'down' : '';
  $('cards').replaceChildren(
    el('div', { class: `card hero ${probTone}`, id: 'prob-up-card' },
      el('div', { class: 'card-label' }, 'Probability up'),
      el('div', { class: 'card-value', id: 'prob-up' }, fracPct(s.prob_up)),
      el('div', { class: 'card-sub' }, `of ${r.forecast.paths} paths close above ${price(last)} after ${h} bars`)),
    card('Expected return', signedPct(s.expected_return_pct),
      `σ ${pct(s.return_std_pct)} · close ${price(s.expected_close)}`, tone(s.expected_return_pct)),
    card('p10 – p90 band', `${price(lo)} – ${price(hi)}`,
      `${signedPct(s.return_p10_pct)} to ${signedPct(s.return_p90_pct)} at the horizon`),
    card('VaR 95 / ES 95', `${pct(s.var95_pct)} / ${pct(s.es95_pct)}`, 'loss at the 5% tail, positive = loss', 'risk'),
    card('Max drawdown', `${pct(s.max_drawdown_pct.p50)}`, `median path · p90 ${pct(s.max_drawdown_pct.p90)}`),
    card('Volatility per bar', `${pct(s.forecast_volatility_pct)}`,
      `forecast vs ${pct(s.realized_volatility_pct)} realised · ${fracPct(s.prob_volatility_above_realized)} of paths above`),
  );
}

function renderTechnicals(t) {
  const rows = [
    ['RSI 14', `${num(t.rsi_14, 1)} (${t.rsi_state})`],
    ['Close', price(t.close)],
    ['SMA 20 / 60', `${price(t.sma_20)} / ${price(t.sma_60)}`],
    ['EMA 20 / 60', `${price(t.ema_20)} / ${price(t.ema_60)}`],
    ['MACD histogram', num(t.macd.histogram, 3)],
    ['Bollinger %b', num(t.bollinger.percent_b, 2)],
    ['ATR 14', `${price(t.atr_14)} (${pct(t.atr_14_pct)})`],
    ['Volume 5/20', t.volume.available ? `${num(t.volume.ratio_5_20, 2)} (avg ${compact(t.volume.avg_5)})` : 'n/a'],
    ['Realised vol (ann.)', pct(t.realized_volatility.annualized_pct, 1)],
  ];
  $('technicals').replaceChildren(...rows.map(([k, v]) => el('tr', {}, el('th', {}, k), el('td', {}, v))));
}

function renderCalibration(cal) {
  $('calibration-panel').hidden = !cal;
  if (!cal) return;
  const row = (name, m) => el('tr', {},
    el('th', {}, name),
    el('td', {}, fracPct(m.coverage_p10_p90)),
    el('td', {}, fracPct(m.direction_hit_rate)),
    el('td', {}, pct(m.mape_pct)));
  $('calibration').replaceChildren(
    el('tr', {}, el('th', {}, `${cal.windows} windows × ${cal.horizon} bars`),
      el('th', {}, 'p10–p90 coverage'), el('th', {}, 'direction hits'), el('th', {}, 'MAPE')),
    row('Kronos', cal.model),
    row('No change', cal.naive),
    el('tr', {}, el('td', { colSpan: 4, class: 'muted small' },
      cal.beats_naive_mape ? 'The model beats the no-change forecast on MAPE in these windows.'
        : 'The no-change forecast is at least as good on MAPE in these windows.')),
  );
}

function renderReport(set, history) {
  const r = set.reports[0];
  $('report').hidden = false;
  $('chart-title').textContent = `${r.symbol} · ${r.interval}`;
  $('chart-sub').textContent =
    `last close ${price(r.last.close)} on ${r.last.timestamp} · ${r.forecast.paths} paths × ` +
    `${r.forecast.horizon} bars · lookback ${r.history.lookback} · ${r.metadata.model.name}`;
  chart.show(history, r);
  renderCards(r);
  $('summary').replaceChildren(...r.summary.map((s) => el('li', {}, s)));
  renderTechnicals(r.technical);
  renderCalibration(r.calibration);
  $('disclaimer').textContent = set.disclaimer;
}

// ------------------------------------------------------------------ analyze

async function onAnalyze(ev) {
  ev.preventDefault();
  let symbol = $('symbol').value.trim();
  // Stored names are case-sensitive ("600977.SH"); a typed "aapl" means the stored "AAPL"
  // when that is the only match.
  const same = stored.filter((s) => s.symbol.toLowerCase() === symbol.toLowerCase());
  if (!stored.some((s) => s.symbol === symbol) && new Set(same.map((s) => s.symbol)).size === 1) {
    symbol = same[0].symbol;
  }
  if (!isSymbol(symbol)) {
    setStatus('Enter a symbol: letters, digits and . _ - ^ = (at most 32).', 'error');
    return;
  }
  if (!$('api-key-field').hidden) api.setApiKey($('api-key').value.trim());
  const request = {
    symbol,
    horizon: Number($('horizon').value),
    paths: Number($('paths').value),
    seed: Number($('seed').value),
    calibrate: Number($('calibrate').value),
  };
  const button = $('analyze');
  button.disabled = true;
  document.body.classList.add('busy');
  setStatus(`Forecasting ${symbol}: ${request.paths} paths × ${request.horizon} bars…`);
  const t0 = performance.now();
  try {
    const set = await api.analyze(request);
    const r = set.reports[0];
    const history = await api.getCandles(symbol, { interval: r.interval, limit: HISTORY_BARS });
    renderReport(set, history);
    setStatus(`${symbol} analysed in ${duration((performance.now() - t0) / 1000)}.`, 'ok');
    selectSymbol(symbol);
  } catch (e) {
    if (e.status === 401) needKey();
    else setStatus(e.message, 'error');
  } finally {
    button.disabled = false;
    document.body.classList.remove('busy');
  }
}

// ------------------------------------------------------------------ metrics

let scrapes = 0;

// A share of the KV budget; a few cached blocks of a large budget still read as "in use".
function kvText(ratio) {
  if (ratio === null) return '–';
  if (ratio > 0 && ratio < 0.0001) return '<0.01%';
  return `${(ratio * 100).toFixed(ratio < 0.1 ? 2 : 1)}%`;
}

async function pollMetrics() {
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
    setTimeout(pollMetrics, METRICS_EVERY_MS);
  }
}

// ------------------------------------------------------------------ start

async function main() {
  try {
    chart = new PriceChart($('chart'));
  } catch (e) {
    setStatus(`Chart unavailable: ${e.message}`, 'error');
  }
  $('analyze-form').addEventListener('submit', onAnalyze);
  pollMetrics();
  api.getModels().then((m) => {
    const d = m.data[0];
    $('model-info').textContent =
      `model ${d.name} · ${(d.n_params / 1e6).toFixed(2)} M params · d_model ${d.d_model} · ${d.quant}`;
  }).catch(() => { $('model-info').textContent = 'model: unknown'; });
  await loadSymbols();
}

main();
