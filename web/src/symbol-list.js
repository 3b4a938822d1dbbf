// The stored-series list as one keyboard stop: a listbox (WAI-ARIA pattern) whose options are
// the stored series; the list itself takes the focus and aria-activedescendant names the
// picked option. ↑/↓, Home/End and PageUp/PageDown pick, Enter analyses, a click picks and a
// double click analyses. Thousands of series render in one pass (one fragment, listeners on
// the list, not on each option). filter(text) narrows the list to the symbols containing the
// text (what is typed in the symbol field); the keys move among the options shown. Each
// option can also be ticked for a batch analysis (Space, or a click on its box; aria-checked),
// which picks nothing: ticks survive a filter and a reload of the list.

import { seriesId as tickKey } from './batch.js';

const PAGE = 10;
const COUNT = new Intl.NumberFormat('en-US'); // one formatter: toLocaleString per row is slow

export class SymbolList {
  /**
   * ul: the <ul role="listbox" tabindex="0">; onPick({symbol, interval}) when an option is
   * picked (click, keys), onActivate({symbol, interval}) to analyse it (Enter, double click),
   * onTick() when the ticked series change.
   */
  constructor(ul, { onPick, onActivate, onTick = () => {} }) {
    this.ul = ul;
    this.items = [];
    this.index = -1;
    this.shown = []; // indices of the options not filtered out, in order
    this.query = '';
    this.ticked = new Set(); // "SYMBOL\tINTERVAL" of the series ticked for a batch
    this.onPick = onPick;
    this.onActivate = onActivate;
    this.onTick = onTick;
    ul.addEventListener('click', (ev) => {
      const i = this.indexOf(ev.target);
      if (i < 0) return;
      if (ev.target.closest('.tick')) this.toggle(i);
      else this.pick(i);
    });
    ul.addEventListener('dblclick', (ev) => {
      const i = this.indexOf(ev.target);
      if (i >= 0 && !ev.target.closest('.tick')) this.onActivate(this.items[i]);
    });
    ul.addEventListener('keydown', (ev) => this.key(ev));
  }

  indexOf(target) {
    const li = target.closest && target.closest('li[role="option"]');
    return li && this.ul.contains(li) ? Number(li.dataset.index) : -1;
  }

  /** items: GET /v1/symbols' data ({symbol, interval, market, rows, first_timestamp,
   * last_timestamp}; market null when none is set). */
  setItems(items, emptyText) {
    this.items = items;
    // Ticks of series no longer stored go; the others stay ticked.
    const keys = new Set(items.map(tickKey));
    for (const k of [...this.ticked]) if (!keys.has(k)) this.ticked.delete(k);
    this.index = -1;
    this.shown = items.map((_, i) => i);
    this.ul.removeAttribute('aria-activedescendant');
    const frag = document.createDocumentFragment();
    if (items.length === 0) {
      const li = document.createElement('li');
      li.className = 'empty';
      li.setAttribute('role', 'presentation');
      li.textContent = emptyText;
      frag.append(li);
    }
    items.forEach((s, i) => {
      const li = document.createElement('li');
      li.id = `series-${i}`;
      li.setAttribute('role', 'option');
      li.setAttribute('aria-selected', 'false');
      li.dataset.index = String(i);
      li.dataset.symbol = s.symbol;
      li.dataset.interval = s.interval;
      li.setAttribute('aria-checked', String(this.ticked.has(tickKey(s))));
      li.title = `${s.first_timestamp} → ${s.last_timestamp}`;
      const tick = document.createElement('span');
      tick.className = 'tick';
      tick.title = 'tick for a batch analysis (Space)';
      const sym = document.createElement('span');
      sym.className = 'sym';
      sym.textContent = s.symbol;
      const meta = document.createElement('span');
      meta.className = 'meta';
      // The exchange calendar its forecast bars follow, when one was set for the symbol.
      const market = s.market ? ` · ${s.market}` : '';
      meta.textContent = `${s.interval}${market} · ${COUNT.format(s.rows)} bars`;
      li.append(tick, sym, meta);
      frag.append(li);
    });
    // After the options (their index is their child index): says so when a filter hides all.
    this.none = document.createElement('li');
    this.none.className = 'empty';
    this.none.setAttribute('role', 'presentation');
    this.none.hidden = true;
    frag.append(this.none);
    this.ul.replaceChildren(frag);
    if (this.query) this.filter(this.query);
  }

  /**
   * Shows only the series whose symbol contains `text` (any case; empty: all of them). The
   * picked option stays picked even when hidden. Returns how many are shown.
   */
  filter(text) {
    const q = String(text || '').trim().toLowerCase();
    this.query = q;
    if (this.items.length === 0) return 0;
    this.shown = [];
    this.items.forEach((s, i) => {
      const show = q === '' || s.symbol.toLowerCase().includes(q);
      const li = this.ul.children[i];
      if (li.hidden === show) li.hidden = !show;
      if (show) this.shown.push(i);
    });
    this.none.hidden = this.shown.length > 0;
    this.none.textContent = this.shown.length ? '' : `No stored series matches '${String(text).trim()}'.`;
    return this.shown.length;
  }

  /** Ticks or unticks option i for a batch analysis. */
  toggle(i) {
    const k = tickKey(this.items[i]);
    if (this.ticked.has(k)) this.ticked.delete(k);
    else this.ticked.add(k);
    this.ul.children[i].setAttribute('aria-checked', String(this.ticked.has(k)));
    this.onTick();
  }

  /** Unticks every series. */
  clearTicks() {
    this.ticked.clear();
    for (const li of this.ul.querySelectorAll('[aria-checked="true"]')) li.setAttribute('aria-checked', 'false');
    this.onTick();
  }

  /** Marks the option of this series as picked (none when it is not listed); no callback. */
  mark(symbol, interval) {
    const i = this.items.findIndex((s) => s.symbol === symbol && s.interval === interval);
    this.highlight(i);
  }

  highlight(i) {
    const old = this.index >= 0 ? this.ul.children[this.index] : null;
    if (old) {
      old.setAttribute('aria-selected', 'false');
      old.classList.remove('selected');
    }
    this.index = i;
    if (i < 0) {
      this.ul.removeAttribute('aria-activedescendant');
      return;
    }
    const li = this.ul.children[i];
    li.setAttribute('aria-selected', 'true');
    li.classList.add('selected');
    this.ul.setAttribute('aria-activedescendant', li.id);
    // Keep the picked option in view inside the list, without scrolling the page (the list is
    // position: relative, so offsetTop is within it).
    const top = li.offsetTop;
    if (top < this.ul.scrollTop) this.ul.scrollTop = top;
    else if (top + li.offsetHeight > this.ul.scrollTop + this.ul.clientHeight) {
      this.ul.scrollTop = top + li.offsetHeight - this.ul.clientHeight;
    }
  }

  pick(i) {
    this.highlight(i);
    this.onPick(this.items[i]);
  }

  // The keys move among the options shown (positions in this.shown); a picked option that a
  // filter hides counts as none picked.
  key(ev) {
    const n = this.shown.length;
    if (n === 0) return;
    const at = this.shown.indexOf(this.index);
    let to = null;
    switch (ev.key) {
      case 'ArrowDown': to = at < 0 ? 0 : Math.min(n - 1, at + 1); break;
      case 'ArrowUp': to = at < 0 ? 0 : Math.max(0, at - 1); break;
      case 'Home': to = 0; break;
      case 'End': to = n - 1; break;
      case 'PageDown': to = Math.min(n - 1, Math.max(0, at) + PAGE); break;
      case 'PageUp': to = Math.max(0, at - PAGE); break;
      case 'Enter':
      case ' ':
        if (at < 0) return;
        ev.preventDefault();
        if (ev.key === 'Enter') this.onActivate(this.items[this.index]);
        else this.toggle(this.index);
        return;
      default: return;
    }
    ev.preventDefault();
    if (to !== at) this.pick(this.shown[to]);
  }
}
