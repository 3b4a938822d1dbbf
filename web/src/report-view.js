// The report panels of one analysis: the headline cards, the chart (or why there is none),
// the summary, technicals, calibration, the backtest's score and the model-written narrative.
// Everything shown comes from the report; the page's own state (its chart, the name of the
// server's language model) is passed in.

import { scoreBacktest } from './backtest.js';
import { $, el } from './dom.js';
import { cardFigures, technicalRows } from './figures.js';
import { fracPct, pct, price, priceSe, signedPct } from './format.js';
import { narrativeView } from './narrative.js';

// "81%" with its Monte Carlo error "± 2 pp" in smaller type.
function withError(value, se, id) {
  const v = el('span', id ? { id } : {}, value);
  return se ? el('span', {}, v, el('span', { class: 'pm' }, `± ${se}`)) : v;
}

function renderCards(r) {
  $('cards').replaceChildren(...cardFigures(r).map((f) => el('div',
    { class: `card ${f.hero ? 'hero ' : ''}${f.tone}`, ...(f.id ? { id: f.id } : {}) },
    el('div', { class: 'card-label' }, f.label, el('span', { class: 'demo-tag', title: 'demo model: not a forecast' }, 'DEMO')),
    el('div', { class: 'card-value' }, withError(f.value, f.se, f.valueId)),
    el('div', { class: 'card-sub' }, f.sub))));
}

function renderTechnicals(t) {
  $('technicals').replaceChildren(...technicalRows(t).map(([k, v]) => el('tr', {}, el('th', {}, k), el('td', {}, v))));
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

// The model-written prose in its own panel, as text; its absence explained when one was asked
// for and none came (the report is whole either way).
function renderNarrative(r, narrativeModel) {
  const v = narrativeView(r, narrativeModel);
  $('narrative-panel').hidden = !v;
  $('narrative-panel').className = `panel narrative-panel${v && v.kind === 'error' ? ' failed' : ''}`;
  if (!v) return;
  $('narrative-title').textContent = v.title;
  $('narrative-text').textContent = v.text;
  $('narrative-warning').hidden = !v.warning;
  $('narrative-warning').textContent = v.warning || '';
  $('narrative-note').textContent = v.note || '';
}

/** "; NAME wrote no narrative (see below)" after a status when one was asked for and none came. */
export function narrativeStatus(set, narrativeModel) {
  const v = narrativeView(set.reports[0], narrativeModel);
  return v && v.kind === 'error' ? `; ${v.model} wrote no narrative (see below)` : '';
}

// The chart, or a note saying why there is none: never a half-drawn one. history: null with
// `why` when it could not be had.
function renderChart(chart, history, r, backtest, why) {
  let problem = why || (chart ? null : 'the chart library did not load');
  if (!problem) {
    try {
      chart.show(history, r, backtest ? backtest.after : null);
    } catch (e) {
      problem = e.message;
    }
  }
  if (problem && chart) chart.clear();
  $('chart').hidden = !!problem;
  $('chart-note').hidden = !problem;
  $('chart-note').textContent = problem ? `No chart for this analysis: ${problem}. The figures below are complete.` : '';
}

/** Every panel of set's first report. history: the candles drawn (null with `why` when they
 *  could not be had); backtest: {barsBack, after} when the report is a backtest's. */
export function renderReport(set, history, { chart, narrativeModel, backtest = null, why = null }) {
  const r = set.reports[0];
  $('report').hidden = false;
  $('chart-title').textContent = `${r.symbol} · ${r.interval}${backtest ? ' · backtest' : ''}`;
  $('chart-sub').textContent =
    `last close ${price(r.last.close)} on ${r.last.timestamp} · ${r.forecast.paths} paths × ` +
    `${r.forecast.horizon} bars · lookback ${r.history.lookback} · ${r.metadata.model.name} ` +
    `(${r.metadata.model.quantization}) · ${r.forecast.calendar}`;
  renderChart(chart, history, r, backtest, why);
  $('legend-actual').hidden = !backtest;
  $('backtest-panel').hidden = !backtest;
  if (backtest) renderBacktest(r, history, backtest);
  const p = r.metadata.params;
  $('paths-note').textContent =
    `± is the Monte Carlo standard error. ${r.forecast.paths} sampled paths in ${r.forecast.rounds} ` +
    `round${r.forecast.rounds === 1 ? '' : 's'}` +
    (p.target_prob_se ? ` (target P(up) ± ${Math.round(p.target_prob_se * 100)} pp${p.target_met ? ': met' : `: not met within ${p.max_paths}`})` : '') +
    `; candles ${r.forecast.ohlc}; seed ${p.seed}.`;
  renderCards(r);
  $('summary').replaceChildren(...r.summary.map((s) => el('li', {}, s)));
  renderTechnicals(r.technical);
  renderCalibration(r.calibration);
  renderNarrative(r, narrativeModel);
  $('disclaimer').textContent = set.disclaimer;
}

// " ± 0.61" after a price, or nothing when there is no error.
const withSe = (se, ref) => (se === null ? '' : ` ${priceSe(se, ref)}`);

function renderBacktest(r, history, bt) {
  const sc = scoreBacktest(r, history.columns, bt.after);
  $('backtest-sub').textContent = `forecast made at ${r.last.timestamp}, ${bt.barsBack} bars before the last stored bar`;
  $('backtest-result').replaceChildren(
    'Over ', el('b', {}, `${sc.bars}`), ' bars, ',
    el('b', { id: 'bt-coverage' }, fracPct(sc.coverage)),
    ' of the realised closes fell inside the p10–p90 band (80% expected); at the last bar the close was ',
    el('b', {}, price(sc.realised)), ` (${signedPct(sc.realisedReturnPct)}) against a mean path of `,
    el('b', { id: 'bt-forecast' }, price(sc.forecast)),
    sc.forecastSe === null ? '' : ` ${priceSe(sc.forecastSe, sc.forecast)}`,
    ...(sc.bandLo === null || sc.bandHi === null ? [] : [
      ' and a p10–p90 band of ',
      el('b', { id: 'bt-band' }, `${price(sc.bandLo)}${withSe(sc.bandLoSe, sc.bandLo)} – ${price(sc.bandHi)}${withSe(sc.bandHiSe, sc.bandHi)}`),
    ]),
    ': direction ',
    el('b', { id: 'bt-direction' }, sc.directionRight === null ? 'n/a' : sc.directionRight ? 'right' : 'wrong'), '.');
}
