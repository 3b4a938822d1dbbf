// A filled band between two values per bar (the forecast's p10 and p90 closes), as a
// lightweight-charts custom series. The library has lines and areas but no "area between two
// lines"; drawing the polygon ourselves keeps the grid visible under the band, which the usual
// trick (an area filled down to the axis, masked by a second area in the background colour)
// does not.
//
// Data items: {time, lower, upper}. Options: fillColor, lineColor, lineWidth.

export class BandSeries {
  /** defaults: the library's customSeriesDefaultOptions (passed in: the library is a global). */
  constructor(defaults) {
    this._defaults = defaults;
    this._renderer = new BandRenderer();
  }

  renderer() {
    return this._renderer;
  }

  update(data, options) {
    this._renderer.update(data, options);
  }

  // Autoscale sees both edges; the last value (the midpoint) is the series' "current" price.
  priceValueBuilder(item) {
    return [item.lower, item.upper, (item.lower + item.upper) / 2];
  }

  isWhitespace(item) {
    return item.lower === undefined || item.upper === undefined;
  }

  defaultOptions() {
    return {
      ...this._defaults,
      fillColor: 'rgba(56, 139, 253, 0.18)',
      lineColor: 'rgba(56, 139, 253, 0.55)',
      lineWidth: 1,
    };
  }

  destroy() {}
}

class BandRenderer {
  update(data, options) {
    this._data = data;
    this._options = options;
  }

  draw(target, priceToCoordinate) {
    const data = this._data;
    if (!data || !data.visibleRange || data.bars.length === 0) return;
    target.useBitmapCoordinateSpace(({ context: ctx, horizontalPixelRatio: hr, verticalPixelRatio: vr }) => {
      // One bar past each edge of the visible range so the band runs off-screen instead of
      // stopping short at the border.
      const from = Math.max(0, data.visibleRange.from - 1);
      const to = Math.min(data.bars.length, data.visibleRange.to + 1);
      const pts = [];
      for (let i = from; i < to; i++) {
        const bar = data.bars[i];
        const d = bar.originalData;
        if (d.lower === undefined || d.upper === undefined) continue;
        const yu = priceToCoordinate(d.upper);
        const yl = priceToCoordinate(d.lower);
        if (yu === null || yl === null) continue;
        pts.push({ x: bar.x * hr, yu: yu * vr, yl: yl * vr });
      }
      if (pts.length < 2) return;
      const o = this._options;
      ctx.beginPath();
      ctx.moveTo(pts[0].x, pts[0].yu);
      for (const p of pts.slice(1)) ctx.lineTo(p.x, p.yu);
      for (const p of pts.slice().reverse()) ctx.lineTo(p.x, p.yl);
      ctx.closePath();
      ctx.fillStyle = o.fillColor;
      ctx.fill();
      ctx.lineWidth = Math.max(1, Math.round(o.lineWidth * hr));
      ctx.strokeStyle = o.lineColor;
      for (const key of ['yu', 'yl']) {
        ctx.beginPath();
        ctx.moveTo(pts[0].x, pts[0][key]);
        for (const p of pts.slice(1)) ctx.lineTo(p.x, p[key]);
        ctx.stroke();
      }
    });
  }
}
