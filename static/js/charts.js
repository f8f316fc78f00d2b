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

  function width(el) {
    return Math.max(260, Math.floor(el.getBoundingClientRect().width || 600));
  }

  // One chart of one or more lines sharing the step axis (a run's key, or compared runs).
  // lines: [{label, series}] ; returns {append(index, series), setLog(on), lines}
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

    function build() {
      if (chart) chart.destroy();
      el.textContent = "";
      chart = new uPlot(
        {
          title: title,
          width: width(el),
          height: opts.height || 220,
          scales: { x: { time: false }, y: { distr: state.log ? 3 : 1 } },
          axes: [{ label: "step" }, { size: 60 }],
          cursor: { drag: { x: true, y: false } },
          series: [{ label: "step" }].concat(
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

  window.AgentSysCharts = { lineChart };
})();
