// The batch ranking as a table: one row per series with its key figures, each with its
// uncertainty (P(up) ± pp, expected return ± its error and its p10–p90 band, VaR / ES 95), the
// series that failed with their error in their own row. A click on a column's header sorts by
// it (again: the other way; aria-sort says which); a click on a row, or its series button
// (the keyboard's way), opens that series' full report. Every string goes in as text.

import { SORTABLE, nextSort, rowTexts, sortRows } from './batch.js';

const COLUMNS = [
  { key: 'rank', label: '#' },
  { key: 'symbol', label: 'Series' },
  { key: 'probUp', label: 'P(up)' },
  { key: 'expectedReturn', label: 'Expected return' },
  { key: 'var95', label: 'Risk (VaR / ES 95)' },
  { key: null, label: 'Last bar' },
];

function cell(tag, text, attrs = {}) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== null) e.textContent = text;
  return e;
}

export class RankingTable {
  /** table: an empty <table>; onOpen(row) when a row is opened. */
  constructor(table, { onOpen }) {
    this.table = table;
    this.onOpen = onOpen;
    this.rows = [];
    this.sort = { key: 'rank', dir: 'asc' };
    this.open = null; // key of the row whose report is shown
    this.head = document.createElement('thead');
    this.body = document.createElement('tbody');
    table.replaceChildren(this.head, this.body);
    this.renderHead();
    this.head.addEventListener('click', (ev) => {
      const b = ev.target.closest('button[data-sort]');
      if (!b) return;
      this.sort = nextSort(this.sort, b.dataset.sort);
      this.renderHead();
      this.renderBody();
      this.head.querySelector(`button[data-sort="${this.sort.key}"]`).focus();
    });
    this.body.addEventListener('click', (ev) => {
      const tr = ev.target.closest('tr[data-key]');
      const row = tr && this.rows.find((r) => r.key === tr.dataset.key);
      if (row && row.report) this.onOpen(row);
    });
  }

  renderHead() {
    const tr = document.createElement('tr');
    for (const c of COLUMNS) {
      const th = cell('th', null, { scope: 'col' });
      if (c.key && SORTABLE.includes(c.key)) {
        const on = this.sort.key === c.key;
        th.setAttribute('aria-sort', on ? (this.sort.dir === 'asc' ? 'ascending' : 'descending') : 'none');
        const b = cell('button', c.label, { type: 'button', 'data-sort': c.key, class: 'sort' });
        b.append(cell('span', on ? (this.sort.dir === 'asc' ? ' ▲' : ' ▼') : '', { 'aria-hidden': 'true' }));
        th.append(b);
      } else {
        th.textContent = c.label;
      }
      tr.append(th);
    }
    this.head.replaceChildren(tr);
  }

  /** Shows these rows (batch.js rankingRows) in the current sort. */
  setRows(rows) {
    this.rows = rows;
    this.renderBody();
  }

  /** Marks the row whose report the page shows. */
  markOpen(key) {
    this.open = key;
    for (const tr of this.body.children) tr.classList.toggle('open', tr.dataset.key === key);
  }

  renderBody() {
    const frag = document.createDocumentFragment();
    for (const r of sortRows(this.rows, this.sort.key, this.sort.dir)) {
      const tr = cell('tr', null, { 'data-key': r.key });
      if (r.key === this.open) tr.classList.add('open');
      const name = `${r.symbol}${r.interval ? ` · ${r.interval}` : ''}`;
      if (r.error) {
        tr.classList.add('failed');
        tr.append(cell('td', '–', { 'data-label': '#' }),
          cell('td', name, { 'data-label': 'Series', class: 'series' }),
          cell('td', `not analysed: ${r.error}`, { colspan: '4', class: 'row-error', 'data-label': 'Error' }));
        frag.append(tr);
        continue;
      }
      const t = rowTexts(r);
      const open = cell('button', name, { type: 'button', class: 'open-report', title: `open the full report of ${name}` });
      const ret = cell('td', null, { 'data-label': 'Expected return' });
      ret.append(cell('span', t.expectedReturn, { class: 'fig' }));
      if (t.band) ret.append(cell('span', t.band, { class: 'sub' }));
      if (r.tiedWith.length) ret.append(cell('span', `indistinguishable from ${r.tiedWith.join(', ')}`, { class: 'sub' }));
      const last = cell('td', r.lastTimestamp || 'n/a', { 'data-label': 'Last bar' });
      if (r.stale) last.append(cell('span', 'stale', { class: 'stale', title: 'its last bar lies well behind the others\'' }));
      const series = cell('td', null, { 'data-label': 'Series', class: 'series' });
      series.append(open);
      tr.append(cell('td', r.rank === null ? '–' : String(r.rank), { 'data-label': '#' }), series,
        cell('td', t.probUp, { 'data-label': 'P(up)', class: 'fig' }), ret,
        cell('td', t.risk, { 'data-label': 'Risk' }), last);
      frag.append(tr);
    }
    this.body.replaceChildren(frag);
  }
}
