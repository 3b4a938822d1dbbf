// The page's controller: the stored-symbol list, the Analyze form and its actions (analyse,
// upload, backtest, batch), the address bar, and which report is shown; the report's panels
// are drawn by report-view.js and the live metrics line by live-metrics.js. Everything it
// shows comes from the server it was loaded from.

import * as api from './api.js';
import { parseCsvCandles, splitForBacktest } from './backtest.js';
import { batchGroups, batchLabel, batchSeries, failedRow, progressView, rankingRows } from './batch.js';
import { PriceChart } from './chart.js';
import { $, el } from './dom.js';
import { inputForField } from './form-errors.js';
import { duration, isSymbol } from './format.js';
import { historyUpTo } from './history.js';
import { startMetricsPoll } from './live-metrics.js';
import { narrativeOffer } from './narrative.js';
import { RankingTable } from './ranking-table.js';
import { rollingProgress, rollingRequest, rollingSummary, verdictKind } from './rolling.js';
import { narrativeStatus as narrativeStatusOf, renderReport as renderReportPanels } from './report-view.js';
import { SymbolList } from './symbol-list.js';
import { decodeState, encodeState, sameState } from './urlstate.js';

const HISTORY_BARS = 400; // bars drawn; the model itself sees up to max_context - horizon
// Extra rows fetched after an analysis, so the history can still end at the report's last bar
// when candles were stored in between (history.js).
const PIN_SLACK = 100;
// From this many stored series on, a filter field narrows the list.
const FILTER_FROM = 8;

let chart = null;
let symbolList = null;
let stored = []; // GET /v1/symbols data
let selected = null; // {symbol, interval} of the stored series picked in the list
const loaded = { symbols: false, model: false }; // server info shown yet (an API key may be missing)
let shownState = null; // the stored-series analysis in the address bar
let narrative = { available: false, model: null }; // what GET /v1/models says (narrative.js)
let ranking = null; // the batch ranking table

function setStatus(text, kind = '') {
  const el = $('status');
  el.textContent = text;
  el.className = `status ${kind}`;
}

// ------------------------------------------------------------------ server info

// A stored series is a symbol and an interval: the one picked is the one analysed.
function selectSymbol(symbol, interval) {
  $('symbol').value = symbol;
  selected = interval ? { symbol, interval } : null;
  $('csv-file').value = '';
  if (symbolList) symbolList.mark(symbol, interval);
}

async function loadSymbols() {
  try {
    stored = (await api.getSymbols()).data;
  } catch (e) {
    if (e.status === 401) return needKey();
    setStatus(`Cannot list stored symbols: ${e.message}`, 'error');
    return;
  }
  loaded.symbols = true;
  const t0 = performance.now();
  symbolList.setItems(stored, 'Nothing stored yet: kronos ingest --symbol AAPL --interval 1d AAPL.csv');
  $('symbol-filter-field').hidden = stored.length <= FILTER_FROM;
  const frag = document.createDocumentFragment();
  for (const sym of new Set(stored.map((s) => s.symbol))) frag.append(el('option', { value: sym }));
  $('symbol-options').replaceChildren(frag);
  if (selected) symbolList.mark(selected.symbol, selected.interval);
  else if (!$('symbol').value && stored.length) selectSymbol(stored[0].symbol, stored[0].interval);
  updateBatchButton();
  performance.measure('kronos:list-symbols', { start: t0 }); // how long a long list takes (the tests read it)
}

async function loadModel() {
  try {
    const models = await api.getModels();
    const d = models.data[0];
    loaded.model = true;
    showNarrativeOffer(narrativeOffer(models));
    $('model-info').textContent =
      `model ${d.name}${d.demo ? ' (DEMO)' : ''} · ${(d.n_params / 1e6).toFixed(2)} M params · d_model ${d.d_model} · ${d.quant}`;
    $('model-info').title = d.source || '';
    if (d.demo) showDemo(`${d.name} declares itself a demo/test checkpoint: its numbers say nothing about the market. ${d.source || ''}`);
    else hideDemo();
  } catch (e) {
    if (e.status === 401) needKey();
    else $('model-info').textContent = 'model: unknown';
  }
}

/** The symbol list and the model line, again (after a key is given, or a server restart). */
function refreshServerInfo() {
  return Promise.all([loadModel(), loadSymbols()]);
}

// The Narrative box, only when the server has a language model, named.
function showNarrativeOffer(offer) {
  narrative = offer;
  $('narrative-field').hidden = !offer.available;
  $('narrative-model').textContent = offer.model || '';
}

/** The request's "narrative" field: asked only when offered and ticked. */
function narrativeField() {
  return narrative.available && $('narrative').checked ? { narrative: true } : {};
}

function needKey() {
  const field = $('api-key-field');
  const first = field.hidden;
  field.hidden = false;
  if (first) $('api-key').focus();
  setStatus(api.hasApiKey()
    ? 'The server refused the API key: check it and press Analyze.'
    : 'This server needs an API key: enter it and press Analyze.', 'error');
}

// The key as typed, for the next /v1 calls (every action reads it: Analyze, a file, Backtest).
function applyKey() {
  if (!$('api-key-field').hidden) api.setApiKey($('api-key').value.trim());
}

function showDemo(text) {
  $('demo-banner').hidden = false;
  $('demo-text').textContent = text.replace(/^DEMO MODEL — not a forecast: ?/, '');
  document.body.classList.add('demo');
}

function hideDemo() {
  $('demo-banner').hidden = true;
  document.body.classList.remove('demo');
}

// ------------------------------------------------------------------ report

// The report's panels (report-view.js), the demo banner when the model is the bundled toy, and
// the server info still missing (an analysis went through: a key given just now works).
function renderReport(set, history, backtest = null, why = null) {
  if (set.model_notice) showDemo(set.model_notice);
  renderReportPanels(set, history, { chart, narrativeModel: narrative.model, backtest, why });
  if (!loaded.symbols || !loaded.model) refreshServerInfo();
}

const narrativeStatus = (set) => narrativeStatusOf(set, narrative.model);

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

const onRetry = (what) => (s) => setStatus(`${what}: the server is busy, retrying in ${s} s…`);

// The message of a refused request beside the input its `field` names (form-errors.js).
function showFieldError(e, upload) {
  const id = inputForField(e.field, { upload });
  if (!id) return false;
  const input = $(id);
  input.setAttribute('aria-invalid', 'true');
  input.setAttribute('aria-describedby', 'field-error');
  input.closest('label').append(el('span', { id: 'field-error', class: 'field-error' }, e.message));
  input.focus();
  return true;
}

function clearFieldError() {
  const msg = $('field-error');
  if (!msg) return;
  const input = $('analyze-form').querySelector('[aria-invalid="true"]');
  if (input) {
    input.removeAttribute('aria-invalid');
    input.removeAttribute('aria-describedby');
  }
  msg.remove();
}

// The running action (an analysis, an upload, a backtest): Cancel aborts it, and so does a
// newer action (Backtest pressed while Analyze runs, back/forward in the address bar), so an
// older answer arriving late never replaces the newer one's report.
let running = null;
// A batch row's report being opened (its history fetch): a newer action or row aborts it.
let viewing = null;

/** Throws 'cancelled' when the action's signal was aborted (an answer that came too late). */
function stillWanted(signal) {
  if (signal.aborted) throw new api.ApiError(0, 'cancelled', { kind: 'cancelled' });
}

// Runs one action with its button disabled, Cancel shown and the page marked busy; errors end
// up in the status, and beside the input a refused field belongs to. fn(signal).
async function busy(button, prefix, fn, { upload = false, batch = false } = {}) {
  if (running) running.abort();
  if (viewing) viewing.abort();
  const mine = new AbortController();
  mine.batch = batch;
  running = mine;
  clearFieldError();
  button.disabled = true;
  $('cancel').hidden = false;
  document.body.classList.add('busy');
  let fieldFocused = false;
  try {
    await fn(mine.signal);
  } catch (e) {
    if (running !== mine) {
      /* replaced by a newer action: that one speaks */
    } else if (e.kind === 'cancelled') setStatus('Cancelled.');
    else if (e.status === 401) needKey();
    else {
      setStatus(`${prefix}${e.message}`, 'error');
      fieldFocused = showFieldError(e, upload);
    }
  } finally {
    button.disabled = false;
    if (running === mine) {
      running = null;
      // The focus was on the button (disabled meanwhile) or on Cancel (hidden now): back to
      // the button, so the keyboard carries on from where it was.
      const lost = !document.activeElement || document.activeElement === document.body ||
        document.activeElement === $('cancel');
      $('cancel').hidden = true;
      document.body.classList.remove('busy');
      if (lost && !fieldFocused) button.focus();
    }
  }
}

function onCancel() {
  if (running) running.abort();
}

function onBacktest() {
  const symbol = selected ? selected.symbol : $('symbol').value.trim();
  const barsBack = Number($('backtest-bars').value);
  applyKey();
  setStatus(`Backtesting ${symbol}: a forecast made ${barsBack} bars ago…`);
  return busy($('backtest'), '', async (signal) => {
    const history = await api.getCandles(symbol, { interval: selected ? selected.interval : undefined, limit: HISTORY_BARS + 600, signal });
    const { past, after } = splitForBacktest(history, barsBack);
    const req = { ...samplingFields(), symbol, interval: history.interval, candles: past.candles, columns: past.columns };
    req.horizon = Math.min(req.horizon, barsBack);
    const set = await api.analyze(req, { onRetry: onRetry(`Backtesting ${symbol}`), signal });
    stillWanted(signal);
    renderReport(set, { ...past, candles: past.candles.slice(-HISTORY_BARS) }, { barsBack, after });
    ranking.markOpen(null);
    setStatus(`${symbol} backtested at ${set.reports[0].last.timestamp}.`, 'ok');
  });
}

function onAnalyze(ev) {
  ev.preventDefault();
  applyKey();
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
    return undefined;
  }
  // The interval of the series picked in the list (a symbol may be stored as 1d and 1h).
  const interval = selected && selected.symbol.toLowerCase() === symbol.toLowerCase() ? selected.interval : undefined;
  return analyzeStored(symbol, interval, ev.restoring === true);
}

// A stored series: the report, then its history up to the report's last bar.
function analyzeStored(symbol, interval, restoring) {
  const request = { symbol, ...samplingFields(), ...narrativeField() };
  if (interval) request.interval = interval;
  const what = `Forecasting ${symbol}${interval ? ` (${interval})` : ''}`;
  setStatus(`${what}: ${request.paths || 'adaptive'} paths × ${request.horizon} bars…`);
  const t0 = performance.now();
  return busy($('analyze'), '', async (signal) => {
    const set = await api.analyze(request, { onRetry: onRetry(what), signal });
    const r = set.reports[0];
    let history = null;
    let why = null;
    try {
      const h = historyUpTo(await api.getCandles(r.symbol, { interval: r.interval, limit: HISTORY_BARS + PIN_SLACK, signal }),
        r.last.timestamp);
      history = { ...h, candles: h.candles.slice(-HISTORY_BARS) };
    } catch (e) {
      if (e.status === 401 || e.kind === 'cancelled') throw e;
      why = `the history could not be read (${e.message})`;
    }
    stillWanted(signal);
    renderReport(set, history, null, why);
    setStatus(`${symbol} analysed in ${duration((performance.now() - t0) / 1000)}${narrativeStatus(set)}.`, 'ok');
    ranking.markOpen(null);
    selectSymbol(r.symbol, r.interval);
    rememberState({ symbol: r.symbol, interval: r.interval, horizon: request.horizon }, restoring);
  });
}

// An uploaded CSV: the server parses and analyses the text itself (nothing is stored); the
// page reads it too, for the chart (a file the page cannot chart is still analysed).
function analyzeFile(file) {
  const t0 = performance.now();
  return busy($('analyze'), `${file.name}: `, async (signal) => {
    const text = await file.text();
    let history = null;
    let why = null;
    try {
      history = parseCsvCandles(text);
    } catch (e) {
      why = e.message;
    }
    const symbol = fileLabel(file.name);
    const what = `Forecasting ${file.name}`;
    setStatus(`${what}${history ? ` (${history.candles.length} rows)` : ''}…`);
    const set = await api.analyze({ ...samplingFields(), ...narrativeField(), symbol, candles: text },
      { onRetry: onRetry(what), signal });
    stillWanted(signal);
    renderReport(set, history && { ...history, candles: history.candles.slice(-HISTORY_BARS) }, null, why);
    ranking.markOpen(null);
    setStatus(`${file.name} analysed in ${duration((performance.now() - t0) / 1000)}${narrativeStatus(set)}.`, 'ok');
  }, { upload: true });
}

// ------------------------------------------------------------------ batch

// The Batch button says what it would analyse: the ticked series, else all the list shows.
function updateBatchButton() {
  const nTicked = symbolList.ticked.size;
  const nShown = stored.length ? symbolList.shown.length : 0;
  $('batch').textContent = batchLabel(nTicked, nShown);
  $('clear-ticks').hidden = nTicked === 0;
  $('batch-what').textContent = nTicked ? `${nTicked} series ticked for a batch` : 'Several at once, ranked:';
}

function showProgress(p) {
  $('batch-progress-box').hidden = false;
  $('batch-progress').max = p.max;
  $('batch-progress').value = p.value;
  $('batch-progress-text').textContent = p.text;
  if (p.symbol) $('batch-progress-text').dataset.symbol = p.symbol;
}

// A request of the batch that the server refused as a whole because none of its series could
// be analysed (a 400 naming symbols[i]): each of its series gets a row with the reason.
function refusedGroup(e, g, order) {
  const one = g.symbols.length === 1;
  return g.symbols.map((sym, k) => failedRow(sym, g.interval,
    one ? e.message : `none of ${g.symbols.join(', ')} (${g.interval}) could be analysed; the server says: ${e.message}`,
    order + k));
}

// A rolling backtest (POST /v1/backtest, a job): the ticked series of one interval, else the
// picked one; its progress comes over the job's events; the report's verdicts are listed and
// the server's HTML report (its plots) shown below them. Cancel (or a newer action) deletes the
// job, which stops its forecasts on the server.
function onRolling() {
  applyKey();
  const ticked = batchSeries(stored, symbolList.shown, symbolList.ticked);
  const group = symbolList.ticked.size ? batchGroups(ticked)[0] : null;
  const symbol = selected ? selected.symbol : $('symbol').value.trim();
  const symbols = group ? group.symbols : symbol ? [symbol] : [];
  const interval = group ? group.interval : selected ? selected.interval : undefined;
  const f = samplingFields();
  let body;
  try {
    body = rollingRequest({ symbols, interval, horizon: f.horizon, paths: f.paths, every: Number($('rolling-every').value),
      seed: f.seed, temperature: f.temperature, top_p: f.top_p });
  } catch (e) {
    setStatus(e.message, 'error');
    return undefined;
  }
  const show = (status) => {
    const p = rollingProgress(status);
    $('rolling-progress').max = p.max;
    $('rolling-progress').value = p.value;
    $('rolling-progress-text').textContent = p.text;
  };
  $('rolling-panel').hidden = false;
  $('rolling-sub').textContent = `${symbols.join(', ')} · starting…`;
  $('rolling-progress-box').hidden = false;
  $('rolling-verdicts').replaceChildren();
  $('rolling-report-box').replaceChildren();
  show(null);
  setStatus(`Rolling backtest of ${symbols.join(', ')}: forecasting from every ${body.every}th bar…`);
  let job = null;
  return busy($('rolling'), 'Rolling backtest: ', async (signal) => {
    const onAbort = () => {
      if (job) api.deleteBacktest(job.status_url).catch(() => {});
    };
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      job = await api.startBacktest(body, { onRetry: onRetry('Rolling backtest'), signal });
      show(job);
      const done = await api.followBacktest(job.events_url, { signal, onProgress: (st) => { if (!signal.aborted) show(st); } });
      show(done);
      const [report, html] = await Promise.all([
        api.backtestResult(job.result_url, 'json', { signal }),
        api.backtestResult(job.result_url, 'html', { signal }),
      ]);
      stillWanted(signal);
      if (report.demo) showDemo(report.demo_notice);
      $('rolling-sub').textContent = rollingSummary(report);
      $('rolling-verdicts').replaceChildren(...report.verdicts.map((v) => el('li', { class: verdictKind(v) }, v)));
      // The frame exists only with a report in it: sandboxed before its document is made.
      const frame = el('iframe', { id: 'rolling-report', class: 'rolling-report', title: 'Backtest report', sandbox: '' });
      frame.srcdoc = html;
      $('rolling-report-box').replaceChildren(frame);
      $('rolling-progress-box').hidden = true;
      setStatus(`Rolling backtest of ${symbols.join(', ')}: ${report.counts.forecasts} forecasts scored.`, 'ok');
      api.deleteBacktest(job.status_url).catch(() => {}); // the page keeps what it shows
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  });
}

// The ticked series (else all shown), streamed request by request (one per interval); the
// ranking fills in as each request's answer comes; a series that failed gets its error in its
// row. Cancel (or a newer action) stops it; what came before stays.
function onBatch() {
  applyKey();
  const series = batchSeries(stored, symbolList.shown, symbolList.ticked);
  if (!series.length) {
    setStatus('No stored series to analyse: tick some in the list, or clear the filter.', 'error');
    return undefined;
  }
  const groups = batchGroups(series);
  const fields = { ...samplingFields(), ...narrativeField() };
  const t0 = performance.now();
  const rows = [];
  $('ranking-panel').hidden = false;
  $('ranking-sub').textContent = `${series.length} series · ${fields.horizon} bars ahead`;
  $('ranking-note').textContent = '';
  ranking.setRows(rows);
  showProgress({ text: `Starting a batch of ${series.length} series…`, value: 0, max: groups.length });
  setStatus(`Batch of ${series.length} series: streaming the progress…`);
  return busy($('batch'), 'Batch: ', async (signal) => {
    try {
      for (const [i, g] of groups.entries()) {
        let set;
        try {
          set = await api.analyzeBatch({ ...fields, symbols: g.symbols, interval: g.interval }, {
            signal,
            onRetry: onRetry('Batch'),
            onProgress: (ev) => {
              if (!signal.aborted) showProgress(progressView(ev, i + 1, groups.length));
            },
          });
        } catch (e) {
          if (e.status === 400 && /^symbols\[\d+\]/.test(e.field || '')) {
            rows.push(...refusedGroup(e, g, rows.length));
            ranking.setRows(rows);
            continue;
          }
          throw e;
        }
        stillWanted(signal);
        const meta = { disclaimer: set.disclaimer, model_notice: set.model_notice };
        if (set.model_notice) showDemo(set.model_notice);
        for (const r of rankingRows(set, rows.length)) rows.push({ ...r, meta });
        ranking.setRows(rows);
      }
      const failed = rows.filter((r) => r.error).length;
      $('ranking-note').textContent = 'Ranked by expected return within each interval; ± is the Monte Carlo ' +
        'standard error. Click a row for its full report (no new forecast: the batch\'s own).';
      setStatus(`Batch of ${series.length} series analysed in ${duration((performance.now() - t0) / 1000)}` +
        `${failed ? `; ${failed} could not be` : ''}.`, failed === series.length ? 'error' : 'ok');
    } catch (e) {
      $('ranking-note').textContent = rows.length ? 'The batch stopped: the rows above came before it did.'
        : 'The batch stopped before any result.';
      throw e;
    } finally {
      $('batch-progress-box').hidden = true;
    }
  }, { batch: true });
}

// A batch row's full report in the single-report view: the batch's own report (nothing is
// computed again), with the series' history fetched for the chart as after an analysis.
async function openBatchRow(row) {
  const r = row.report;
  if (running && !running.batch) running.abort(); // a single analysis would replace it later
  if (viewing) viewing.abort();
  const mine = new AbortController();
  viewing = mine;
  setStatus(`Opening ${r.symbol} (${r.interval}) from the batch…`);
  let history = null;
  let why = null;
  try {
    const h = historyUpTo(await api.getCandles(r.symbol, { interval: r.interval, limit: HISTORY_BARS + PIN_SLACK, signal: mine.signal }),
      r.last.timestamp);
    history = { ...h, candles: h.candles.slice(-HISTORY_BARS) };
  } catch (e) {
    if (e.kind === 'cancelled') return;
    if (e.status === 401) {
      needKey();
      return;
    }
    why = `the history could not be read (${e.message})`;
  }
  if (viewing !== mine) return;
  viewing = null;
  renderReport({ ...row.meta, reports: [r] }, history, null, why);
  ranking.markOpen(row.key);
  if (!running) setStatus(`${r.symbol} (${r.interval}): its report from the batch${narrativeStatus({ reports: [r] })}.`, 'ok');
  selectSymbol(r.symbol, r.interval);
  rememberState({ symbol: r.symbol, interval: r.interval, horizon: r.forecast.horizon }, false);
  $('chart-title').scrollIntoView({ block: 'nearest' });
}

// ------------------------------------------------------------------ address bar

// A stored-series analysis goes into the hash (a new history entry, or the same one when it
// was itself restored from the address bar).
function rememberState(state, restoring) {
  shownState = state;
  const hash = encodeState(state);
  if (location.hash === hash) return;
  if (restoring) history.replaceState(null, '', hash);
  else history.pushState(null, '', hash);
}

// The analysis the address bar names (load, back, forward): the fields set, then analysed.
function restoreState() {
  const st = decodeState(location.hash);
  if (!st || sameState(st, shownState)) return;
  selectSymbol(st.symbol, st.interval);
  if (st.horizon !== null) $('horizon').value = String(st.horizon);
  shownState = st;
  const ev = new Event('submit', { cancelable: true });
  ev.restoring = true;
  onAnalyze(ev);
}

// ------------------------------------------------------------------ start

async function main() {
  try {
    chart = new PriceChart($('chart'));
  } catch (e) {
    setStatus(`Chart unavailable: ${e.message}`, 'error');
  }
  symbolList = new SymbolList($('symbol-list'), {
    onPick: (s) => selectSymbol(s.symbol, s.interval),
    onActivate: (s) => {
      selectSymbol(s.symbol, s.interval);
      $('analyze-form').requestSubmit();
    },
    onTick: updateBatchButton,
  });
  ranking = new RankingTable($('ranking'), { onOpen: openBatchRow });
  $('analyze-form').addEventListener('submit', onAnalyze);
  $('backtest').addEventListener('click', onBacktest);
  $('rolling').addEventListener('click', onRolling);
  $('batch').addEventListener('click', onBatch);
  $('clear-ticks').addEventListener('click', () => {
    symbolList.clearTicks();
    $('batch').focus();
  });
  $('cancel').addEventListener('click', onCancel);
  // A refused field's message stays until that field (or any other) is edited.
  $('analyze-form').addEventListener('input', clearFieldError);
  $('analyze-form').addEventListener('change', clearFieldError);
  $('symbol').addEventListener('input', () => {
    selected = null;
    symbolList.mark(null, null);
  });
  // A long list (hundreds of series) narrows to the symbols containing the text typed.
  $('symbol-filter').addEventListener('input', () => {
    symbolList.filter($('symbol-filter').value);
    updateBatchButton();
  });
  // A key typed in: the list and the model line load with it at once.
  $('api-key').addEventListener('change', () => {
    applyKey();
    if (api.hasApiKey()) refreshServerInfo();
  });
  // A restarted server (or a network back): its list and model may have changed.
  api.onReconnect(() => refreshServerInfo());
  window.addEventListener('popstate', restoreState);
  window.kronosPage = { chart }; // the tests' window into what is drawn
  startMetricsPoll();
  const info = refreshServerInfo();
  restoreState();
  await info;
}

main();
