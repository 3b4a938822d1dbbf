// The page's controller: the stored-symbol list, the Analyze form, the report panels and the
// live metrics poll. Everything it shows comes from the server it was loaded from.

import * as api from './api.js';
import { parseCsvCandles, scoreBacktest, splitForBacktest } from './backtest.js';
import { PriceChart } from './chart.js';
import { compact, duration, fracPct, isSymbol, num, pct, price, signedPct } from './format.js';
import { parsePrometheus, summarize } from './metrics.js';

const $ = (id) => document.getElementById(id);
const METRICS_EVERY_MS = 2000;
const HISTORY_BARS = 400; // bars drawn; the model itself sees up to max_context - horizon

let chart = null;
let stored = []; // GET /v1/symbols data
let selected = null; // {symbol, interval} of the stored series picked in the list

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

// A stored series is a symbol and an interval: the one clicked is the one analysed.
function selectSymbol(symbol, interval) {
  $('symbol').value = symbol;
  selected = interval ? { symbol, interval } : null;
  $('csv-file').value = '';
  for (const li of $('symbol-list').children) {
    li.classList.toggle('selected', li.dataset.symbol === symbol && li.dataset.interval === interval);
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
    button.addEventListener('click', () => selectSymbol(s.symbol, s.interval));
    button.addEventListener('dblclick', () => {
      selectSymbol(s.symbol, s.interval);
      $('analyze-form').requestSubmit();
    });
    list.append(el('li', { 'data-symbol': s.symbol, 'data-interval': s.interval }, button));
    options.append(el('option', { value: s.symbol }));
  }
  if (!$('symbol').value && stored.length) selectSymbol(stored[0].symbol, stored[0].interval);
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

// "81%" with its Monte Carlo error "± 2 pp" in smaller type.
function withError(value, se) {
  const v = el('span', {}, value);
  return se ? el('span', {}, v, el('span', { class: 'pm' }, `± ${se}`)) : v;
}

function renderCards(r) {
  const s = r.statistics;
  const e = s.standard_error || {};
  const last = r.last.close;
  const h = r.forecast.horizon;
  const lo = last * (1 + s.return_p10_pct / 100);
  const hi = last * (1 + s.return_p90_pct / 100);
  const tone = (x) => (x > 0 ? 'up' : x < 0 ? 'down' : '');
  const probTone = s.prob_up >= 0.6 ? 'up' : s.prob_up <= 0.4 ? 'down' : '';
  $('cards').replaceChildren(
    el('div', { class: `card hero ${probTone}`, id: 'prob-up-card' },
      el('div', { class: 'card-label' }, 'Probability up'),
      el('div', { class: 'card-value' }, withError(el('span', { id: 'prob-up' }, fracPct(s.prob_up)),
        e.prob_up == null ? null : `${Math.max(1, Math.round(e.prob_up * 100))} pp`)),
      el('div', { class: 'card-sub' }, `of ${r.forecast.paths} paths close above ${price(last)} after ${h} bars`)),
    card('Expected return', withError(signedPct(s.expected_return_pct), e.expected_return_pct == null ? null : pct(e.expected_return_pct)),
      `σ ${pct(s.return_std_pct)} · close ${price(s.expected_close)}`, tone(s.expected_return_pct)),
    card('p10 – p90 band', `${price(lo)} – ${price(hi)}`,
      `${signedPct(s.return_p10_pct)} to ${signedPct(s.return_p90_pct)} at the horizon`),
    card('VaR 95 / ES 95', withError(`${pct(s.var95_pct)} / ${pct(s.es95_pct)}`, e.var95_pct == null ? null : pct(e.var95_pct)),
      'loss at the 5% tail, positive = loss; ± VaR error', 'risk'),
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

function renderReport(set, history, backtest = null) {
  const r = set.reports[0];
  $('report').hidden = false;
  $('chart-title').textContent = `${r.symbol} · ${r.interval}${backtest ? ' · backtest' : ''}`;
  $('chart-sub').textContent =
    `last close ${price(r.last.close)} on ${r.last.timestamp} · ${r.forecast.paths} paths × ` +
    `${r.forecast.horizon} bars · lookback ${r.history.lookback} · ${r.metadata.model.name} ` +
    `(${r.metadata.model.quantization}) · ${r.forecast.calendar}`;
  chart.show(history, r, backtest ? backtest.after : null);
  $('legend-actual').hidden = !backtest;
  $('backtest-panel').hidden = !backtest;
  if (backtest) renderBacktest(r, history, backtest);
  const p = r.metadata.params;
  $('paths-note').textContent =
    `± is the Monte Carlo standard error. ${r.forecast.paths} sampled paths in ${r.forecast.rounds} ` +
    `round${r.forecast.rounds === 1 ? '' : 's'}` +
    (p.target_prob_se ? ` (target P(up) ± ${Math.round(p.target_prob_se * 100)} pp${p.target_met ? ': met' : `: not met within ${p.max_paths}`})` : '') +
    `; candles ${r.forecast.ohlc}; seed ${p.seed}.`;
  if (set.model_notice) showDemo(set.model_notice);
  renderCards(r);
  $('summary').replaceChildren(...r.summary.map((s) => el('li', {}, s)));
  renderTechnicals(r.technical);
  renderCalibration(r.calibration);
  $('disclaimer').textContent = set.disclaimer;
}

function showDemo(text) {
  $('demo-banner').hidden = false;
  $('demo-text').textContent = text.replace(/^DEMO MODEL — not a forecast: ?/, '');
}

function renderBacktest(r, history, bt) {
  const sc = scoreBacktest(r, history.columns, bt.after);
  $('backtest-sub').textContent = `forecast made at ${r.last.timestamp}, ${bt.barsBack} bars before the last stored bar`;
  $('backtest-result').replaceChildren(
    'Over ', el('b', {}, `${sc.bars}`), ' bars, ',
    el('b', { id: 'bt-coverage' }, fracPct(sc.coverage)),
    ' of the realised closes fell inside the p10–p90 band (80% expected); at the last bar the close was ',
    el('b', {}, price(sc.realised)), ` (${signedPct(sc.realisedReturnPct)}) against a mean path of `,
    el('b', {}, price(sc.forecast)), ': direction ',
    el('b', { id: 'bt-direction' }, sc.directionRight ? 'right' : 'wrong'), '.');
}

// ------------------------------------------------------------------ analyze

// The sampling fields as the user set them; an empty paths field leaves the server's adaptive
// paths (until P(up) is within ±2 pp), the same default as kronos analyze.
function samplingFields() {
  const req = {
    horizon: Number($('horizon').value),
    seed: Number($('seed').value),
    calibrate: Number($('calibrate').value),
    temperature: Number($('temperature').value),
    top_p: Number($('top-p').value),
  };
  if ($('paths').value.trim() !== '') req.paths = Number($('paths').value);
  return req;
}

// A label for an uploaded file that the store's name rules accept.
function fileLabel(name) {
  const base = name.replace(/\.[^.]*$/, '').replace(/[^A-Za-z0-9._\-^=]/g, '_').slice(0, 32);
  return base || 'upload';
}

async function onBacktest() {
  const symbol = selected ? selected.symbol : $('symbol').value.trim();
  const barsBack = Number($('backtest-bars').value);
  const button = $('backtest');
  button.disabled = true;
  document.body.classList.add('busy');
  setStatus(`Backtesting ${symbol}: a forecast made ${barsBack} bars ago…`);
  try {
    const history = await api.getCandles(symbol, { interval: selected ? selected.interval : undefined, limit: HISTORY_BARS + 600 });
    const { past, after } = splitForBacktest(history, barsBack);
    const req = { ...samplingFields(), symbol, interval: history.interval, candles: past.candles, columns: past.columns };
    req.horizon = Math.min(req.horizon, barsBack);
    const set = await api.analyze(req);
    renderReport(set, { ...past, candles: past.candles.slice(-HISTORY_BARS) }, { barsBack, after });
    setStatus(`${symbol} backtested at ${set.reports[0].last.timestamp}.`, 'ok');
  } catch (e) {
    if (e.status === 401) needKey();
    else setStatus(e.message, 'error');
  } finally {
    button.disabled = false;
    document.body.classList.remove('busy');
  }
}

async function onAnalyze(ev) {
  ev.preventDefault();
  const file = $('csv-file').files[0];
  if (file) return analyzeFile(file);
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
  // The interval of the series picked in the list (a symbol may be stored as 1d and 1h).
  const interval = selected && selected.symbol.toLowerCase() === symbol.toLowerCase() ? selected.interval : undefined;
  const request = { symbol, ...samplingFields() };
  if (interval) request.interval = interval;
  const button = $('analyze');
  button.disabled = true;
  document.body.classList.add('busy');
  setStatus(`Forecasting ${symbol}${interval ? ` (${interval})` : ''}: ${request.paths || 'adaptive'} paths × ${request.horizon} bars…`);
  const t0 = performance.now();
  try {
    const set = await api.analyze(request);
    const r = set.reports[0];
    const history = await api.getCandles(symbol, { interval: r.interval, limit: HISTORY_BARS });
    renderReport(set, history);
    setStatus(`${symbol} analysed in ${duration((performance.now() - t0) / 1000)}.`, 'ok');
    selectSymbol(r.symbol, r.interval);
  } catch (e) {
    if (e.status === 401) needKey();
    else setStatus(e.message, 'error');
  } finally {
    button.disabled = false;
    document.body.classList.remove('busy');
  }
}

// An uploaded CSV: the server parses and analyses the text itself (nothing is stored); the
// page parses it too, for the chart.
async function analyzeFile(file) {
  const button = $('analyze');
  button.disabled = true;
  document.body.classList.add('busy');
  const t0 = performance.now();
  try {
    const text = await file.text();
    const history = parseCsvCandles(text);
    const symbol = fileLabel(file.name);
    setStatus(`Forecasting ${file.name} (${history.candles.length} rows)…`);
    const set = await api.analyze({ ...samplingFields(), symbol, candles: text });
    renderReport(set, { ...history, candles: history.candles.slice(-HISTORY_BARS) });
    setStatus(`${file.name} analysed in ${duration((performance.now() - t0) / 1000)}.`, 'ok');
  } catch (e) {
    if (e.status === 401) needKey();
    else setStatus(`${file.name}: ${e.message}`, 'error');
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
  $('backtest').addEventListener('click', onBacktest);
  $('symbol').addEventListener('input', () => { selected = null; });
  pollMetrics();
  api.getModels().then((m) => {
    const d = m.data[0];
    $('model-info').textContent =
      `model ${d.name}${d.demo ? ' (DEMO)' : ''} · ${(d.n_params / 1e6).toFixed(2)} M params · d_model ${d.d_model} · ${d.quant}`;
    $('model-info').title = d.source || '';
    if (d.demo) showDemo(`${d.name} declares itself a demo/test checkpoint: its numbers say nothing about the market. ${d.source || ''}`);
  }).catch(() => { $('model-info').textContent = 'model: unknown'; });
  await loadSymbols();
}

main();
