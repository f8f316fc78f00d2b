// The sweep page's chart, hand-written SVG: parallel coordinates (one axis per shown param,
// the chosen metric last, each run a line coloured by that metric) or a scatter (a param on x,
// the metric on y). Rows come from GET /api/sweeps/{id}/table, the same rows the table shows;
// grouped by seed, a row is a group at its mean (sweep_groups.js) with a min – max bar.
// Values are numbers, strings (a param such as optimizer=adam gets categorical positions on
// its axis; a param mixing both puts the numbers low and the strings above them) and, for
// metrics, "NaN" / "Infinity" / "-Infinity", drawn in red under the axis.
(function () {
  "use strict";
  const NS = "http://www.w3.org/2000/svg";
  const SPECIAL = { NaN: "NaN", Infinity: "∞", "-Infinity": "−∞" };
  // viridis, sampled: perceptually even and readable for the colour-blind.
  const STOPS = ["#440154", "#3b528b", "#21918c", "#5ec962", "#c8b820"];
  const NAN_COLOR = "#c92a2a";
  const NONE_COLOR = "#adb5bd";

  // -- values and their words -----------------------------------------------------------------
  function valueOf(row, column) {
    if (column.kind === "param") return row.params[column.id.slice(6)];
    if (column.kind === "metric") {
      const m = row.metrics[column.key];
      return m ? (m[column.stat] ?? undefined) : undefined;
    }
    return row[column.id] ?? undefined;
  }

  // A group's (sweep_groups.js) statistics of a metric: {mean, std, min, max, n, count}.
  function spreadOf(row, column) {
    const s = row.spread && column && column.kind === "metric" && (row.spread[column.key] || {})[column.stat];
    return s && s.n > 1 ? s : null;
  }

  // A bar from a group's min to its max at x, over its line or dot.
  function spreadBar(row, metric, metricScale, x, stroke) {
    const s = spreadOf(row, metric);
    if (!s) return "";
    const [a, b] = [metricScale.pos(s.min), metricScale.pos(s.max)];
    const cap = (y) => `<line class="spread" x1="${(x - 4).toFixed(1)}" x2="${(x + 4).toFixed(1)}" y1="${y.toFixed(1)}" y2="${y.toFixed(1)}" stroke="${stroke}"/>`;
    return `<line class="spread" data-run="${esc(row.run_id)}" x1="${x.toFixed(1)}" x2="${x.toFixed(1)}" y1="${a.toFixed(1)}" y2="${b.toFixed(1)}" stroke="${stroke}"/>${cap(a)}${cap(b)}`;
  }

  function isSpecial(value) {
    return typeof value === "string" && Object.prototype.hasOwnProperty.call(SPECIAL, value);
  }

  function number(value) {
    if (value === 0) return "0";
    const size = Math.abs(value);
    if (Number.isInteger(value) && size < 1e6) return String(value);
    if (size >= 1e5 || size < 1e-3) {
      return value.toExponential(2).replace(/\.?0+e/, "e").replace("e+", "e");
    }
    return String(Number(value.toPrecision(4)));
  }

  // The text of a cell, compact; `bad` when it is not a finite number where one was wanted.
  function format(value, column) {
    if (value === undefined || value === null) return { text: "", bad: false };
    if (column && column.kind === "metric" && isSpecial(value)) return { text: SPECIAL[value], bad: true };
    if (typeof value === "number") return { text: number(value), bad: false };
    if (typeof value === "boolean") return { text: String(value), bad: false };
    return { text: String(value), bad: false };
  }

  // -- scales ---------------------------------------------------------------------------------
  function niceTicks(low, high) {
    if (!(high > low)) return [low];
    const raw = (high - low) / 4;
    const magnitude = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * magnitude).find((s) => s >= raw);
    const ticks = [];
    for (let t = Math.ceil(low / step) * step; t <= high + step * 1e-9; t += step) ticks.push(Number(t.toPrecision(12)));
    return ticks;
  }

  // Where each value of `column` goes between pixel `a` (lowest) and `b` (highest).
  function scale(column, rows, a, b) {
    const nums = [];
    const words = new Set();
    let special = false;
    for (const row of rows) {
      const v = valueOf(row, column);
      const s = spreadOf(row, column); // a group's min and max stay on the axis
      if (s) nums.push(s.min, s.max);
      if (typeof v === "number") nums.push(v);
      else if (column.kind === "metric" && isSpecial(v)) special = true;
      else if (v !== undefined && v !== null) words.add(String(v));
    }
    // Strings in the order the table sorts them: case-insensitive.
    const cats = [...words].sort((x, y) => x.localeCompare(y, undefined, { sensitivity: "base", numeric: true }));
    const low = Math.min(...nums);
    const high = Math.max(...nums);
    const log = nums.length > 1 && low > 0 && high / low >= 100;
    const span = b - a;
    const catShare = !cats.length ? 0 : nums.length ? Math.min(0.4, 0.12 * cats.length) : 1;
    const numEnd = a + span * (1 - catShare) - (cats.length && nums.length ? Math.sign(span) * 14 : 0);
    const t = (v) => (log ? Math.log10(v) : v);
    const numPos = (v) => (high === low ? (a + numEnd) / 2 : a + ((t(v) - t(low)) / (t(high) - t(low))) * (numEnd - a));
    const catStart = nums.length ? a + span * (1 - catShare) : a;
    const catPos = (i) => (cats.length === 1 ? (nums.length ? (catStart + b) / 2 : (a + b) / 2) : catStart + (i / (cats.length - 1)) * (b - catStart));
    const catIndex = new Map(cats.map((c, i) => [c, i]));
    const specialPos = a - Math.sign(span) * 18;
    function pos(v) {
      if (typeof v === "number") return numPos(v);
      if (v === undefined || v === null) return null;
      if (column.kind === "metric" && isSpecial(v)) return specialPos;
      return catPos(catIndex.get(String(v)));
    }
    const ticks = [];
    if (nums.length) {
      const values = high === low ? [low] : log ? decades(low, high) : niceTicks(low, high);
      for (const v of values) ticks.push({ at: numPos(v), label: number(v) });
    }
    cats.forEach((c, i) => ticks.push({ at: catPos(i), label: c, cat: true }));
    if (special) ticks.push({ at: specialPos, label: "NaN", bad: true });
    // Colour: 0..1 along the numbers (log when the axis is), for the metric axis.
    const unit = (v) => (typeof v !== "number" ? null : high === low ? 0.5 : (t(v) - t(low)) / (t(high) - t(low)));
    return { pos, ticks, log, unit, empty: !nums.length && !cats.length && !special };
  }

  function decades(low, high) {
    const out = [];
    for (let e = Math.ceil(Math.log10(low)); e <= Math.floor(Math.log10(high)); e++) out.push(Math.pow(10, e));
    return out.length ? out : [low, high];
  }

  function colour(u) {
    if (u === null) return NONE_COLOR;
    const x = Math.max(0, Math.min(1, u)) * (STOPS.length - 1);
    const i = Math.min(STOPS.length - 2, Math.floor(x));
    const mix = (p, q) => Math.round(p + (q - p) * (x - i));
    const rgb = (h) => [1, 3, 5].map((k) => parseInt(h.slice(k, k + 2), 16));
    const [p, q] = [rgb(STOPS[i]), rgb(STOPS[i + 1])];
    return `rgb(${mix(p[0], q[0])},${mix(p[1], q[1])},${mix(p[2], q[2])})`;
  }

  function lineColour(metricScale, value) {
    if (isSpecial(value)) return NAN_COLOR;
    return colour(metricScale.unit(value));
  }

  function esc(text) {
    return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  }

  function clip(text, px) {
    const room = Math.max(3, Math.floor(px / 6.5));
    return text.length > room ? text.slice(0, room - 1) + "…" : text;
  }

  // -- drawing --------------------------------------------------------------------------------
  // `right`: the labels on the axis' right (the last axis of the parallel chart, whose left
  // side is covered by the lines arriving at it).
  function axisMarkup(ticks, at, vertical, room, right) {
    let out = "";
    for (const tick of ticks) {
      const cls = "tick" + (tick.cat ? " cat" : "") + (tick.bad ? " bad" : "");
      const label = esc(clip(tick.label, room));
      const side = right ? 1 : -1;
      out += vertical
        ? `<text class="${cls}" x="${at + side * 5}" y="${tick.at + 3.5}" text-anchor="${right ? "start" : "end"}">${label}</text><line class="tickmark" x1="${at + side * 3}" x2="${at}" y1="${tick.at}" y2="${tick.at}"/>`
        : `<text class="${cls}" x="${tick.at}" y="${at + 15}" text-anchor="middle">${label}</text><line class="tickmark" x1="${tick.at}" x2="${tick.at}" y1="${at}" y2="${at + 3}"/>`;
    }
    return out;
  }

  function parallel(svg, rows, axes, metric, width) {
    const H = 330;
    const top = 40;
    const bottom = H - 34;
    const left = 64;
    const right = 64; // the last axis' label is centred on it
    const n = axes.length;
    const W = Math.max(width, n * 96);
    const gap = n > 1 ? (W - left - right) / (n - 1) : 0;
    const xs = axes.map((_, i) => (n > 1 ? left + i * gap : W / 2));
    const scales = axes.map((c) => scale(c, rows, bottom, top));
    const metricScale = scales[n - 1];
    let out = `<g class="axes">`;
    axes.forEach((c, i) => {
      const label = esc(clip(c.label, Math.max(gap, 80) - 30));
      const cls = c === metric ? "axis-label metric" : "axis-label";
      out += `<line class="axis" x1="${xs[i]}" x2="${xs[i]}" y1="${top}" y2="${bottom}"/>`;
      out += `<text class="${cls}" x="${xs[i]}" y="${top - 14}" text-anchor="middle"><title>${esc(c.label)}${scales[i].log ? " (log scale)" : ""}</title>${label}${scales[i].log ? " (log)" : ""}</text>`;
      const last = n > 1 && i === n - 1;
      out += axisMarkup(scales[i].ticks, xs[i], true, last ? right - 8 : Math.min(gap, 90) - 10, last);
    });
    const axisPart = out + "</g>"; // drawn over the lines, so that their labels stay legible
    out = `<g class="runs">`;
    for (const row of rows) {
      // A param the run does not have (a sweep whose runs set different ones) is passed over:
      // the line goes on to its next axis, so every run is drawn, not only those with all.
      let d = "";
      axes.forEach((c, i) => {
        const y = scales[i].pos(valueOf(row, c));
        if (y === null || y === undefined || Number.isNaN(y)) return;
        d += `${d ? "L" : "M"}${xs[i].toFixed(1)} ${y.toFixed(1)}`;
      });
      if (!d) continue;
      const stroke = metric ? lineColour(metricScale, valueOf(row, metric)) : "#5c7cfa";
      const id = esc(row.run_id);
      if (n === 1) { // one axis (no params): a strip of dots, spread a little sideways
        const [x, y] = d.slice(1).split(" ").map(Number);
        out += spreadBar(row, metric, metricScale, x + jitter(row.run_id) * 2, stroke);
        out += `<circle class="dot" data-run="${id}" cx="${(x + jitter(row.run_id) * 2).toFixed(1)}" cy="${y}" r="5" fill="${stroke}"/>`;
        continue;
      }
      out += `<path class="hit" data-run="${id}" d="${d}"/><path class="line" data-run="${id}" d="${d}" stroke="${stroke}"/>`;
      // Beside the metric's axis (on it, the axis hid it), spread so that bars seldom meet.
      if (metric) out += spreadBar(row, metric, metricScale, xs[n - 1] - 10 + jitter(row.run_id) * 0.5, stroke);
    }
    out += `</g>${axisPart}<g class="overlay"></g>`;
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    svg.setAttribute("width", W);
    svg.setAttribute("height", H);
    svg.innerHTML = out;
  }

  function scatter(svg, rows, x, metric, width) {
    const H = 330;
    const W = Math.max(width, 300);
    const left = 64;
    const right = 20;
    const top = 18;
    const bottom = H - 46;
    const sx = scale(x, rows, left + 10, W - right);
    const sy = scale(metric, rows, bottom - 28, top); // room for NaN above the x axis
    let out = `<g class="axes"><line class="axis" x1="${left}" x2="${W - right}" y1="${bottom}" y2="${bottom}"/>`;
    out += `<line class="axis" x1="${left}" x2="${left}" y1="${top}" y2="${bottom}"/>`;
    out += axisMarkup(sx.ticks, bottom, false, 80) + axisMarkup(sy.ticks, left, true, 58);
    out += `<text class="axis-label" x="${(left + W - right) / 2}" y="${H - 6}" text-anchor="middle">${esc(x.label)}${sx.log ? " (log)" : ""}</text>`;
    out += `<text class="axis-label metric" x="14" y="${(top + bottom) / 2}" text-anchor="middle" transform="rotate(-90 14 ${(top + bottom) / 2})">${esc(metric.label)}${sy.log ? " (log)" : ""}</text></g><g class="runs">`;
    for (const row of rows) {
      const xv = valueOf(row, x);
      const yv = valueOf(row, metric);
      let px = sx.pos(xv);
      const py = sy.pos(yv);
      if (px === null || py === null || px === undefined || py === undefined) continue;
      if (typeof xv !== "number") px += jitter(row.run_id);
      out += spreadBar(row, metric, sy, px, lineColour(sy, yv));
      out += `<circle class="dot" data-run="${esc(row.run_id)}" cx="${px.toFixed(1)}" cy="${py.toFixed(1)}" r="5" fill="${lineColour(sy, yv)}"/>`;
    }
    out += `</g><g class="overlay"></g>`;
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    svg.setAttribute("width", W);
    svg.setAttribute("height", H);
    svg.innerHTML = out;
  }

  // Points of one category spread a little sideways, the same way on every redraw.
  function jitter(id) {
    let h = 0;
    for (let i = 0; i < id.length; i++) h = (h * 31 + id.charCodeAt(i)) | 0;
    return ((Math.abs(h) % 17) - 8) * 1.2;
  }

  // chart(svg, tip, {onHover(runId | null), onOpen(runId)}) -> {draw(spec), highlight(runId)}
  function chart(svg, tip, handlers) {
    let spec = null;
    let lit = null;
    const byId = () => new Map(spec.rows.map((r) => [r.run_id, r]));

    function draw(next) {
      spec = next;
      const width = Math.floor(svg.parentElement.getBoundingClientRect().width) || 800;
      if (spec.mode === "scatter" && spec.x && spec.metric) scatter(svg, spec.rows, spec.x, spec.metric, width);
      else if (spec.metric || spec.axes.length) {
        parallel(svg, spec.rows, spec.metric ? [...spec.axes, spec.metric] : spec.axes, spec.metric, width);
      }
      else svg.innerHTML = "";
      const shown = lit;
      lit = null;
      highlight(shown);
    }

    function highlight(runId) {
      if (runId === lit) return;
      lit = runId;
      const overlay = svg.querySelector("g.overlay");
      if (!overlay) return;
      overlay.textContent = "";
      svg.classList.toggle("dim", Boolean(runId));
      if (!runId) return;
      const mark = svg.querySelector(`.line[data-run="${CSS.escape(runId)}"], .dot[data-run="${CSS.escape(runId)}"]`);
      if (!mark) return;
      const copy = mark.cloneNode(false);
      copy.classList.add("hl");
      copy.removeAttribute("data-run");
      overlay.appendChild(copy);
    }

    function showTip(runId, event) {
      const row = spec && byId().get(runId);
      if (!row) { tip.hidden = true; return; }
      const columns = (spec.mode === "scatter" ? [spec.x, spec.metric] : [...spec.axes, spec.metric]).filter(Boolean);
      const lines = columns.map((c) => {
        const f = format(valueOf(row, c), c);
        const s = row.spread && c.kind === "metric" && (row.spread[c.key] || {})[c.stat];
        const of = s ? ` <span class="muted">mean of n=${s.n}/${s.count}${s.n > 1 ? `, ${number(s.min)} – ${number(s.max)}` : ""}</span>` : "";
        return `<div><span class="muted">${esc(c.label)}</span> <b class="${f.bad ? "nan" : ""}">${esc(f.text || "—")}</b>${of}</div>`;
      });
      tip.innerHTML = `<div class="tip-name">${esc(row.name)}</div>` + lines.join("");
      tip.hidden = false;
      const box = tip.parentElement.getBoundingClientRect();
      const x = event.clientX - box.left + 14;
      tip.style.left = Math.min(x, box.width - tip.offsetWidth - 4) + "px";
      tip.style.top = event.clientY - box.top + 14 + "px";
    }

    svg.addEventListener("mouseover", (event) => {
      const target = event.target.closest("[data-run]");
      if (!target) return;
      handlers.onHover(target.dataset.run);
      showTip(target.dataset.run, event);
    });
    svg.addEventListener("mousemove", (event) => {
      const target = event.target.closest("[data-run]");
      if (target) showTip(target.dataset.run, event);
    });
    svg.addEventListener("mouseout", (event) => {
      const target = event.target.closest("[data-run]");
      if (target && !(event.relatedTarget && event.relatedTarget.closest && event.relatedTarget.closest(`[data-run="${CSS.escape(target.dataset.run)}"]`))) {
        handlers.onHover(null);
        tip.hidden = true;
      }
    });
    svg.addEventListener("click", (event) => {
      const target = event.target.closest("[data-run]");
      if (target) handlers.onOpen(target.dataset.run);
    });
    return { draw, highlight };
  }

  window.AgentSysSweep = { chart, format, valueOf, colour, NS };
})();
