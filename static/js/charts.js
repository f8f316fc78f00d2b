// Metric charts on uPlot. A series from /api/runs/.../metrics is {steps, values}; values that
// are not finite come as "NaN" / "Infinity" / "-Infinity": they break the line (null) and
// are marked with a red band at their step, so a divergence is seen, not hidden.
// Drag to zoom, double-click to reset; the log toggle redraws with a log y scale.
(function () {
  "use strict";
  const COLORS = ["#3b5bdb", "#e8590c", "#2b8a3e", "#ae3ec9", "#1098ad", "#c92a2a", "#5c940d", "#d6336c"];

  function split(series) {
    const xs = [];
    const ys = [];
    const bad = [];
    for (let i = 0; i < series.steps.length; i++) {
      const value = series.values[i];
      xs.push(series.steps[i]);
      if (typeof value === "number") {
        ys.push(value);
      } else {
        ys.push(null);
        bad.push(series.steps[i]);
      }
    }
    return { xs, ys, bad };
  }

  function markBad(getBad) {
    return (u) => {
      const steps = getBad();
      if (!steps.length) return;
      const ctx = u.ctx;
      ctx.save();
      ctx.fillStyle = "rgba(201, 42, 42, 0.55)";
      for (const step of steps) {
        const x = u.valToPos(step, "x", true);
        if (x >= u.bbox.left && x <= u.bbox.left + u.bbox.width) {
          ctx.fillRect(Math.round(x) - 1, u.bbox.top, 2, u.bbox.height);
        }
      }
      ctx.restore();
    };
  }

  // Axis labels stay short however large the values: 1e305 as "1e305", not 306 digits cut off
  // by the axis' edge (uPlot's default writes every digit).
  function tickLabel(value) {
    if (value === null || value === undefined || !Number.isFinite(value)) return "";
    const size = Math.abs(value);
    if (size !== 0 && (size >= 1e5 || size < 1e-3)) {
      return value.toExponential(1).replace("e+", "e").replace(".0e", "e");
    }
    return String(Number(value.toPrecision(4)));
  }

  // The y axis' ticks, about five: uPlot's own tick steps stop near 1e16, so a loss that went
  // to 1e305 left the axis with no tick and no label at all. Decades on a log scale.
  function ySplits(u, axisIndex, min, max) {
    if (!Number.isFinite(min) || !Number.isFinite(max) || min >= max) return [min];
    const ticks = [];
    if (u.scales.y.distr === 3 && min > 0) {
      const low = Math.log10(min);
      const high = Math.log10(max);
      const step = Math.max(1, Math.ceil((high - low) / 5));
      for (let e = Math.ceil(low / step) * step; e <= high + 1e-9 && ticks.length < 12; e += step) {
        ticks.push(Math.pow(10, e));
      }
      return ticks.length ? ticks : [min, max];
    }
    const raw = max / 5 - min / 5; // not (max - min) / 5: that overflows near 1e308
    const magnitude = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * magnitude).find((s) => s >= raw);
    for (let i = Math.ceil(min / step); i * step <= max && ticks.length < 12; i++) {
      ticks.push(i * step);
    }
    return ticks.length ? ticks : [min, max];
  }

  // The tick steps uPlot may choose from (it picks the first far enough apart in pixels); its
  // own list, too, ends near 1e16, where it then drew no axis at all.
  function yIncrs(u, axisIndex, min, max) {
    const raw = max / 5 - min / 5;
    if (!Number.isFinite(raw) || raw <= 0) return [1];
    const base = Math.pow(10, Math.floor(Math.log10(raw)));
    return [1, 2, 5, 10, 20, 50, 100, 1e3, 1e4].map((m) => m * base).filter(Number.isFinite);
  }

  // Whether a series' finite values span so many orders of magnitude that a linear axis shows
  // one spike and a flat line (a diverging loss): the run page turns the log scale on then.
  function needsLog(series) {
    const low = series.min_value;
    const high = series.max_value;
    return typeof low === "number" && typeof high === "number" && low > 0 && high / low >= 1e6;
  }

  function width(el) {
    return Math.max(260, Math.floor(el.getBoundingClientRect().width || 600));
  }

  // One chart of one or more lines sharing the step axis (a run's key, or compared runs).
  // lines: [{label, series}] ; returns {append(index, series), setLog(on), lines}
  // options: {height, xLabel (default "step"), xTick(value) → its label, xIncrs (tick steps)}:
  // the Spend page's x is a day, labelled as a date, one tick a day or a week.
  function lineChart(el, title, lines, options) {
    const opts = options || {};
    const state = { log: false, lines: lines.map((line) => ({ label: line.label, ...split(line.series) })) };
    let chart = null;

    function aligned() {
      if (state.lines.length === 1) {
        const only = state.lines[0];
        return [only.xs, only.ys.map((v) => (state.log && v !== null && v <= 0 ? null : v))];
      }
      // Several runs: union of their steps, null where a run has no point.
      const steps = [...new Set(state.lines.flatMap((l) => l.xs))].sort((a, b) => a - b);
      const data = [steps];
      for (const line of state.lines) {
        const at = new Map(line.xs.map((x, i) => [x, line.ys[i]]));
        data.push(steps.map((s) => {
          const v = at.has(s) ? at.get(s) : null;
          return state.log && v !== null && v <= 0 ? null : v;
        }));
      }
      return data;
    }

    // The y axis' labels, also kept on the element (data-y-ticks) for whoever checks the axis.
    function yLabels(u, splits) {
      const labels = splits.map(tickLabel);
      el.dataset.yTicks = labels.join(" ");
      return labels;
    }

    // The x axis' labels, kept on the element (data-x-ticks) as the y axis' are.
    function xAxis() {
      const axis = { label: opts.xLabel || "step" };
      if (opts.xIncrs) axis.incrs = opts.xIncrs;
      if (opts.xTick) {
        axis.values = (u, splits) => {
          const labels = splits.map(opts.xTick);
          el.dataset.xTicks = labels.join(" ");
          return labels;
        };
      }
      return axis;
    }

    function xSeries() {
      const series = { label: opts.xLabel || "step" };
      if (opts.xTick) series.value = (u, v) => (v === null || v === undefined ? "--" : opts.xTick(v));
      return series;
    }

    function build() {
      if (chart) chart.destroy();
      el.textContent = "";
      chart = new uPlot(
        {
          title: title,
          width: width(el),
          height: opts.height || 220,
          scales: { x: { time: false }, y: { distr: state.log ? 3 : 1 } },
          axes: [xAxis(), { size: 64, incrs: yIncrs, splits: ySplits, filter: (u, splits) => splits, values: yLabels }],
          cursor: { drag: { x: true, y: false } },
          series: [xSeries()].concat(
            state.lines.map((line, i) => ({
              label: line.label,
              stroke: COLORS[i % COLORS.length],
              width: 1.5,
              spanGaps: false,
              points: { show: line.xs.length < 60 },
            }))
          ),
          hooks: { draw: [markBad(() => state.lines.flatMap((l) => l.bad))] },
        },
        aligned(),
        el
      );
      el.dataset.points = String(state.lines.reduce((n, l) => n + l.xs.length, 0));
      el.dataset.nan = String(state.lines.reduce((n, l) => n + l.bad.length, 0));
    }

    build();
    new ResizeObserver(() => chart && chart.setSize({ width: width(el), height: opts.height || 220 })).observe(el);
    return {
      append(index, series) {
        const more = split(series);
        const line = state.lines[index];
        const last = line.xs.length ? line.xs[line.xs.length - 1] : -Infinity;
        for (let i = 0; i < more.xs.length; i++) {
          if (more.xs[i] <= last) continue; // already drawn
          line.xs.push(more.xs[i]);
          line.ys.push(more.ys[i]);
          if (more.ys[i] === null) line.bad.push(more.xs[i]);
        }
        chart.setData(aligned());
        el.dataset.points = String(state.lines.reduce((n, l) => n + l.xs.length, 0));
        el.dataset.nan = String(state.lines.reduce((n, l) => n + l.bad.length, 0));
      },
      setLog(on) {
        state.log = on;
        build();
      },
      lastStep(index) {
        const xs = state.lines[index || 0].xs;
        return xs.length ? xs[xs.length - 1] : null;
      },
    };
  }

  window.AgentSysCharts = { lineChart, needsLog, tickLabel };
})();
