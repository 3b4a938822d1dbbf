// Regenerates data/calendars/{nyse,sse,hkex}.json (crypto.json is written by hand: 24/7, no
// holidays). Not part of the build: the JSON files are committed, compiled into the library
// (src/series/CMakeLists.txt) and installed, where the library reads them again at run time
// (data/calendars/README.md). Run it when a new year's exchange
// holidays are announced, check the diff against the exchange's notice, and commit:
//
//   mkdir -p /tmp/calgen && cd /tmp/calgen && npm install chinese-days@1.5.7 date-holidays@3.37.0
//   NODE_PATH=/tmp/calgen/node_modules node scripts/gen-calendars.mjs data/calendars
//
// NYSE: computed from the exchange's published rules (below) plus its special closures.
// SSE/SZSE: the mainland statutory holidays on weekdays (chinese-days, from the State
// Council's notices), plus the days the exchanges closed beyond them (EXTRA_SSE).
// HKEX: Hong Kong general holidays on weekdays (date-holidays 'HK'), half days (morning
// session only) on Christmas Eve, New Year's Eve and Lunar New Year's Eve.
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const require = createRequire(import.meta.url);
const out = process.argv[2] || 'data/calendars';
const iso = (d) => d.toISOString().slice(0, 10);
const utc = (y, m, d) => new Date(Date.UTC(y, m - 1, d));
const wd = (d) => d.getUTCDay(); // 0 Sunday .. 6 Saturday
const add = (d, n) => new Date(d.getTime() + n * 86400000);
const nth = (y, m, weekday, n) => { // n-th weekday of a month (n = -1: the last)
  if (n > 0) { let d = utc(y, m, 1); while (wd(d) !== weekday) d = add(d, 1); return add(d, 7 * (n - 1)); }
  let d = utc(y, m + 1, 1); d = add(d, -1); while (wd(d) !== weekday) d = add(d, -1); return d;
};
function easter(y) { // Anonymous Gregorian algorithm (Meeus)
  const a = y % 19, b = Math.floor(y / 100), c = y % 100, d = Math.floor(b / 4), e = b % 4;
  const f = Math.floor((b + 8) / 25), g = Math.floor((b - f + 1) / 3);
  const h = (19 * a + b - d - g + 15) % 30, i = Math.floor(c / 4), k = c % 4;
  const l = (32 + 2 * e + 2 * i - h - k) % 7, m = Math.floor((a + 11 * h + 22 * l) / 451);
  const month = Math.floor((h + l - 7 * m + 114) / 31), day = ((h + l - 7 * m + 114) % 31) + 1;
  return utc(y, month, day);
}
const observed = (d) => (wd(d) === 6 ? add(d, -1) : wd(d) === 0 ? add(d, 1) : d);

function nyse(y0, y1) {
  const hol = [], early = [];
  for (let y = y0; y <= y1; y++) {
    const ny = utc(y, 1, 1);
    if (wd(ny) !== 6) hol.push(observed(ny)); // a Saturday New Year is not observed on Friday
    hol.push(nth(y, 1, 1, 3), nth(y, 2, 1, 3), add(easter(y), -2), nth(y, 5, 1, -1));
    if (y >= 2022) hol.push(observed(utc(y, 6, 19)));
    hol.push(observed(utc(y, 7, 4)), nth(y, 9, 1, 1));
    const thanks = nth(y, 11, 4, 4);
    hol.push(thanks, observed(utc(y, 12, 25)));
    early.push([iso(add(thanks, 1)), '13:00']);
    const j4 = wd(utc(y, 7, 4));
    if (j4 >= 2 && j4 <= 5) early.push([iso(utc(y, 7, 3)), '13:00']);
    const xe = utc(y, 12, 24);
    if (wd(xe) >= 1 && wd(xe) <= 4) early.push([iso(xe), '13:00']);
  }
  // Special closures: Hurricane Sandy; national days of mourning (G. H. W. Bush, J. Carter).
  for (const s of ['2012-10-29', '2012-10-30', '2018-12-05', '2025-01-09']) hol.push(new Date(`${s}T00:00:00Z`));
  early.sort((a, b) => a[0].localeCompare(b[0]));
  return { holidays: [...new Set(hol.filter((d) => wd(d) >= 1 && wd(d) <= 5).map(iso))].sort(), early };
}

const EXTRA_SSE = ['2024-02-09']; // Lunar New Year's Eve 2024: exchanges closed, not a statutory day

function sse(y0, y1) {
  const cd = require('chinese-days');
  const hol = cd.getHolidaysInRange(`${y0}-01-01`, `${y1}-12-31`, true)
    .filter((s) => { const w = wd(new Date(`${s}T00:00:00Z`)); return w >= 1 && w <= 5; });
  return [...new Set([...hol, ...EXTRA_SSE])].sort();
}

function hkex(y0, y1) {
  const H = require('date-holidays');
  const hd = new H('HK');
  const hol = [], early = [];
  for (let y = y0; y <= y1; y++) {
    const list = hd.getHolidays(y).filter((h) => h.type === 'public');
    for (const h of list) {
      const d = new Date(`${h.date.slice(0, 10)}T00:00:00Z`);
      if (wd(d) >= 1 && wd(d) <= 5) hol.push(iso(d));
      if (h.name === '農曆年初一') {
        const eve = add(d, -1);
        if (wd(eve) >= 1 && wd(eve) <= 5) early.push([iso(eve), '12:00']);
      }
    }
    for (const d of [utc(y, 12, 24), utc(y, 12, 31)]) if (wd(d) >= 1 && wd(d) <= 5) early.push([iso(d), '12:00']);
  }
  const h = [...new Set(hol)].sort();
  return { holidays: h, early: early.filter(([d]) => !h.includes(d)).sort() };
}

function write(name, obj) {
  // One holiday per line keeps a new year's diff readable.
  const lines = JSON.stringify(obj, null, 2)
    .replace(/"holidays": \[[^\]]*\]/s, `"holidays": [\n    ${obj.holidays.map((d) => `"${d}"`).join(',\n    ')}\n  ]`)
    .replace(/"early_closes": \[[\s\S]*?\n  \]/, `"early_closes": [\n    ${obj.early_closes.map(([d, t]) => `["${d}", "${t}"]`).join(',\n    ')}\n  ]`);
  writeFileSync(join(out, `${name}.json`), `${lines}\n`);
}

const n = nyse(2010, 2028);
write('nyse', {
  name: 'NYSE', aliases: ['NASDAQ', 'XNYS', 'XNAS', 'US', 'AMEX', 'ARCA'],
  title: 'New York Stock Exchange and Nasdaq, regular trading hours',
  source: "NYSE holiday rules (nyse.com 'Holidays & Trading Hours'): New Year, Martin Luther King Jr. Day, Washington's Birthday, Good Friday, Memorial Day, Juneteenth (from 2022), Independence Day, Labor Day, Thanksgiving, Christmas, with weekend observance; special closures 2012-10-29/30, 2018-12-05, 2025-01-09; 13:00 early closes on July 3, the day after Thanksgiving and Christmas Eve. Generated by scripts/gen-calendars.mjs.",
  years: [2010, 2028], timezone: 'America/New_York', weekdays: ['Mon', 'Tue', 'Wed', 'Thu', 'Fri'],
  sessions: [['09:30', '16:00']], bar_label: 'start', symbol_suffixes: ['.US', '.N', '.O', '.NYSE', '.NASDAQ'],
  holidays: n.holidays, early_closes: n.early,
});
write('sse', {
  name: 'SSE', aliases: ['SZSE', 'XSHG', 'XSHE', 'CN', 'SHSE', 'A-SHARES'],
  title: 'Shanghai and Shenzhen stock exchanges (A-shares), continuous trading',
  source: 'Mainland China statutory holidays on weekdays from the State Council notices (via the chinese-days npm package 1.5.7), plus 2024-02-09 (the exchanges closed on Lunar New Year\'s Eve). Generated by scripts/gen-calendars.mjs.',
  years: [2010, 2026], timezone: 'Asia/Shanghai', weekdays: ['Mon', 'Tue', 'Wed', 'Thu', 'Fri'],
  sessions: [['09:30', '11:30'], ['13:00', '15:00']], bar_label: 'end', symbol_suffixes: ['.SH', '.SS', '.SZ', '.SHA', '.SHE', '.XSHG', '.XSHE'],
  holidays: sse(2010, 2026), early_closes: [],
});
const h = hkex(2013, 2027);
write('hkex', {
  name: 'HKEX', aliases: ['XHKG', 'HK', 'SEHK'],
  title: 'Hong Kong Stock Exchange, continuous trading',
  source: 'Hong Kong general holidays on weekdays (date-holidays npm package 3.37.0, ISC / CC-BY-3.0, from the Hong Kong government gazette); morning-only half days on Christmas Eve, New Year\'s Eve and Lunar New Year\'s Eve. Typhoon and rainstorm closures cannot be known in advance. Generated by scripts/gen-calendars.mjs.',
  years: [2013, 2027], timezone: 'Asia/Hong_Kong', weekdays: ['Mon', 'Tue', 'Wed', 'Thu', 'Fri'],
  sessions: [['09:30', '12:00'], ['13:00', '16:00']], bar_label: 'start',
  // The closing auction session (16:00-16:10, closing at random from 16:08): vendors' bars.
  closing_auction: ['16:00', '16:10'], symbol_suffixes: ['.HK', '.HKG'],
  holidays: h.holidays, early_closes: h.early,
});
console.log(`wrote nyse (${n.holidays.length} holidays), sse, hkex (${h.holidays.length}) to ${out}`);
