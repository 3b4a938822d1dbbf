// The price chart: stored candles (history) continued by the forecast — the p10–p90 band of
// the sampled closes, the median path and the mean path — with volume underneath. One chart
// object lives for the page; each analysis replaces its data.

import { BandSeries } from './band-series.js';
import { toChartTime } from './format.js';

const COLORS = {
  up: '#26a69a',
  down: '#ef5350',
  median: '#58a6ff',
  mean: '#f0b429',
  actual: '#e6edf3',
  text: '#c4cdd8',
  grid: 'rgba(125, 138, 156, 0.14)',
  border: 'rgba(125, 138, 156, 0.35)',
};

// History bars visible when a result arrives (the rest is a scroll away).
const VISIBLE_HISTORY = 110;

export class PriceChart {
  constructor(container) {
    const LC = window.LightweightCharts;
    if (!LC) throw new Error('the chart library did not load');
    this.LC = LC;
    this.chart = LC.createChart(container, {
      autoSize: true,
      layout: {
        background: { type: LC.ColorType.Solid, color: 'transparent' },
        textColor: COLORS.text,
        fontFamily: 'Inter, "Segoe UI", system-ui, sans-serif',
        attributionLogo: false,
      },
      grid: { vertLines: { color: COLORS.grid }, horzLines: { color: COLORS.grid } },
      rightPriceScale: { borderColor: COLORS.border, scaleMargins: { top: 0.08, bottom: 0.22 } },
      timeScale: { borderColor: COLORS.border, rightOffset: 4 },
      crosshair: { mode: LC.CrosshairMode.Normal },
    });
    this.volume = this.chart.addSeries(LC.HistogramSeries, {
      priceScaleId: 'volume',
      priceFormat: { type: 'volume' },
      lastValueVisible: false,
      priceLineVisible: false,
    });
    this.chart.priceScale('volume').applyOptions({ scaleMargins: { top: 0.82, bottom: 0 } });
    this.band = this.chart.addCustomSeries(new BandSeries(LC.customSeriesDefaultOptions), {
      priceLineVisible: false,
      lastValueVisible: false,
      title: '',
    });
    this.candles = this.chart.addSeries(LC.CandlestickSeries, {
      upColor: COLORS.up,
      downColor: COLORS.down,
      borderVisible: false,
      wickUpColor: COLORS.up,
      wickDownColor: COLORS.down,
    });
    this.markers = LC.createSeriesMarkers(this.candles, []);
    const line = { lineWidth: 2, priceLineVisible: false, crosshairMarkerRadius: 3 };
    this.median = this.chart.addSeries(LC.LineSeries, { ...line, color: COLORS.median, title: 'p50' });
    this.mean = this.chart.addSeries(LC.LineSeries, {
      ...line,
      color: COLORS.mean,
      lineStyle: LC.LineStyle.Dashed,
      title: 'mean',
    });
    // A backtest's realised closes after the cut, drawn over the forecast.
    this.actual = this.chart.addSeries(LC.LineSeries, { ...line, lineWidth: 3, color: COLORS.actual, title: 'actual' });
  }

  /**
   * history: GET /v1/candles's answer (rows of arrays); report: one report of /v1/analyze;
   * after: for a backtest, the rows that followed the history (same columns), else null.
   * The forecast lines and the band start at the last close, so they visibly grow out of it.
   */
  show(history, report, after = null) {
    const LC = this.LC;
    const col = Object.fromEntries(history.columns.map((name, i) => [name, i]));
    const bars = history.candles.map((r) => ({
      time: toChartTime(r[col.timestamps]),
      open: r[col.open],
      high: r[col.high],
      low: r[col.low],
      close: r[col.close],
    }));
    this.candles.setData(bars);
    const hasVolume = 'volume' in col;
    this.volume.setData(hasVolume
      ? history.candles.map((r, i) => ({
        time: bars[i].time,
        value: r[col.volume],
        color: bars[i].close >= bars[i].open ? 'rgba(38, 166, 154, 0.35)' : 'rgba(239, 83, 80, 0.35)',
      }))
      : []);

    const last = bars[bars.length - 1];
    const anchor = { time: last.time, value: last.close };
    const steps = report.forecast.steps.map((s) => ({ ...s, time: toChartTime(s.timestamp) }));
    this.band.setData([
      { time: last.time, lower: last.close, upper: last.close },
      ...steps.map((s) => ({ time: s.time, lower: s.p10.close, upper: s.p90.close })),
    ]);
    this.median.setData([anchor, ...steps.map((s) => ({ time: s.time, value: s.p50.close }))]);
    this.mean.setData([anchor, ...steps.map((s) => ({ time: s.time, value: s.mean.close }))]);
    this.actual.setData(after
      ? [anchor, ...after.map((r) => ({ time: toChartTime(r[col.timestamps]), value: r[col.close] }))]
      : []);

    const intraday = history.candles.some((r) => String(r[col.timestamps]).length > 10);
    this.chart.applyOptions({ timeScale: { timeVisible: intraday, secondsVisible: false } });
    this.markers.setMarkers([{
      time: last.time,
      position: 'aboveBar',
      color: COLORS.text,
      shape: 'arrowDown',
      text: 'last close',
    }]);
    const n = bars.length;
    this.chart.timeScale().setVisibleLogicalRange({
      from: Math.max(0, n - VISIBLE_HISTORY),
      to: n + steps.length + 3,
    });
  }
}
