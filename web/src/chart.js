// The price chart: stored candles (history) continued by the forecast — the p10–p90 band of
// the sampled closes, the median path and the mean path — with volume underneath. One chart
// object lives for the page; each analysis replaces its data (computed by chart-data.js first,
// so a history it cannot read leaves the chart empty rather than half-drawn).

import { BandSeries } from './band-series.js';
import { buildChartData, withMinRange } from './chart-data.js';

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
    this.container = container;
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
    // Every series on the price scale keeps a minimum visible range (a flat series would
    // otherwise magnify its rounding noise into a swing, with no axis labels).
    const autoscaleInfoProvider = (base) => withMinRange(base());
    this.band = this.chart.addCustomSeries(new BandSeries(LC.customSeriesDefaultOptions), {
      autoscaleInfoProvider,
      priceLineVisible: false,
      lastValueVisible: false,
      title: '',
    });
    this.candles = this.chart.addSeries(LC.CandlestickSeries, {
      autoscaleInfoProvider,
      upColor: COLORS.up,
      downColor: COLORS.down,
      // Borders in the body's colour: a flat candle (open = close) still shows as a line.
      borderUpColor: COLORS.up,
      borderDownColor: COLORS.down,
      wickUpColor: COLORS.up,
      wickDownColor: COLORS.down,
    });
    this.markers = LC.createSeriesMarkers(this.candles, []);
    const line = { lineWidth: 2, priceLineVisible: false, crosshairMarkerRadius: 3, autoscaleInfoProvider };
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

  /** The price series (the forecast's share their price format). */
  priceSeries() {
    return [this.candles, this.band, this.median, this.mean, this.actual];
  }

  /**
   * history: GET /v1/candles's answer (rows of arrays); report: one report of /v1/analyze;
   * after: for a backtest, the rows that followed the history (same columns), else null.
   * Throws (having drawn nothing new) when a timestamp cannot be read.
   */
  show(history, report, after = null) {
    const d = buildChartData(history, report, after);
    for (const s of this.priceSeries()) s.applyOptions({ priceFormat: d.priceFormat });
    this.candles.setData(d.bars);
    this.volume.setData(d.volume);
    this.band.setData(d.band);
    this.median.setData(d.median);
    this.mean.setData(d.mean);
    this.actual.setData(d.actual);
    this.chart.applyOptions({ timeScale: { timeVisible: d.intraday, secondsVisible: false } });
    this.markers.setMarkers([{
      time: d.lastTime,
      position: 'aboveBar',
      color: COLORS.text,
      shape: 'arrowDown',
      text: 'last close',
    }]);
    const n = d.bars.length;
    this.chart.timeScale().setVisibleLogicalRange({
      from: Math.max(0, n - VISIBLE_HISTORY),
      to: n + d.band.length + 2,
    });
    // For the tests and the curious: what is drawn.
    this.container.dataset.lastTime = String(d.lastTime);
    this.container.dataset.precision = String(d.priceFormat.precision);
  }

  /** Empties the chart (an analysis whose history cannot be drawn). */
  clear() {
    for (const s of [...this.priceSeries(), this.volume]) s.setData([]);
    this.markers.setMarkers([]);
    delete this.container.dataset.lastTime;
    delete this.container.dataset.precision;
  }

  /** The prices at the top and bottom of the price pane, or null before anything is drawn. */
  visiblePriceRange() {
    const h = this.chart.paneSize().height;
    const top = this.candles.coordinateToPrice(0);
    const bottom = this.candles.coordinateToPrice(h);
    return top === null || bottom === null ? null : { top, bottom };
  }
}
