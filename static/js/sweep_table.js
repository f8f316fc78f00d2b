// A sweep's page: every run of the sweep as a row (status, params, each metric's last / min /
// max) from GET /api/sweeps/{id}/table, sorted, filtered and paged by the server, with the
// chart of the same rows (sweep_chart.js). The view (sort, filters, page) lives in the URL, so
// it can be shared and survives a reload; the columns shown and the chart's choices are
// remembered per sweep in localStorage. The agents feed keeps it live: a run that logs a point
// or changes status re-fetches the current page, at most once a second.
(function () {
  "use strict";
  const S = window.AgentSysSweep;
  const page = document.getElementById("sweep-page");
  const sweepId = page.dataset.sweep;
  const STORE = `agentsys.sweep.${sweepId}.view`;
  const RUN_LABELS = { created_at: "created", duration_s: "duration", exit_code: "exit" };
  const LOSS = ["loss", "train/loss", "train_loss", "val_loss", "eval/loss"];
  const $ = (id) => document.getElementById(id);
  const esc = (t) => String(t).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

  const url = new URL(window.location.href);
  const state = {
    sort: url.searchParams.get("sort") || "-created_at",
    statuses: new Set((url.searchParams.get("status") || "").split(",").filter(Boolean)),
    where: url.searchParams.getAll("where"),
    offset: Math.max(0, Number(url.searchParams.get("offset")) || 0),
    limit: [25, 50, 100, 200, 500].includes(Number(url.searchParams.get("limit"))) ? Number(url.searchParams.get("limit")) : 50,
    group: url.searchParams.get("group") === "seed", // one row a seed group (sweep_groups.js)
    hidden: new Set(),
    mode: "parallel",
    metric: null,
    x: null,
  };
  let chosen = false; // whether this person chose the columns of this sweep yet
  try {
    chosen = localStorage.getItem(STORE) !== null;
    const saved = JSON.parse(localStorage.getItem(STORE) || "{}");
    state.hidden = new Set(saved.hidden || []);
    Object.assign(state, { mode: saved.mode || "parallel", metric: saved.metric || null, x: saved.x || null });
  } catch (error) { /* a damaged entry: the defaults */ }
  function save() {
    chosen = true;
    localStorage.setItem(STORE, JSON.stringify({ hidden: [...state.hidden], mode: state.mode, metric: state.metric, x: state.x }));
  }

  let data = null;
  let columnsKey = "";
  let lit = null;
  let drawn = false;
  const Groups = window.AgentSysSweepGroups;
  const grouped = () => Boolean(data && data.groups);
  const chart = S.chart($("sweep-svg"), $("chart-tip"), {
    onHover: (id) => light(id),
    onOpen: (id) => {
      if (!Groups.isGroup(id)) { window.location.href = runLink(id, chartMetric()); return; }
      Groups.toggle(id, true); // a group's line opens its runs in the table
      renderRows();
      $("sweep-table").querySelector(`tr[data-run="${CSS.escape(id)}"]`)?.scrollIntoView({ block: "nearest" });
    },
  });

  const column = (id) => data.columns.find((c) => c.id === id);
  const Phone = window.AgentSysSweepPhone;
  const chosenColumns = () => data.columns.filter((c) => c.id === "name" || !state.hidden.has(c.id));
  const shown = () => Phone.columns(chosenColumns(), data, state); // a phone: the few that matter
  const runLink = (id, metric) => `/runs/${encodeURIComponent(id)}/` + (metric && metric.key ? `#metric-${encodeURIComponent(metric.key)}` : "");
  const chartMetric = () => (data && state.metric && column(state.metric)) || null;

  // -- the request --------------------------------------------------------------------------
  function query(paged) {
    const q = new URLSearchParams();
    if (state.sort !== "-created_at") q.set("sort", state.sort);
    if (state.statuses.size) q.set("status", [...state.statuses].join(","));
    for (const w of state.where) q.append("where", w);
    if (paged && state.group) q.set("group", "seed");
    if (paged) {
      if (state.offset) q.set("offset", state.offset);
      if (state.limit !== 50) q.set("limit", state.limit);
    }
    return q;
  }

  function request() {
    const q = query(true);
    if (!q.has("limit")) q.set("limit", state.limit);
    return fetch(`/api/sweeps/${encodeURIComponent(sweepId)}/table?${q}`, { headers: { Accept: "application/json" } });
  }
  // The first page is asked for at once, while the rest of the page loads.
  let early = request();
  early.catch(() => {}); // awaited (and said) in load()

  let inFlight = null;
  let again = false;
  async function load() {
    if (inFlight) { again = true; return inFlight; }
    inFlight = (async () => {
      const response = await (early || request());
      early = null;
      const body = await response.json().catch(() => ({}));
      if (!response.ok) {
        // A link or a reload may carry a filter on a column the sweep no longer has: say
        // which (the server's words), and offer the way back to the whole table.
        $("table-error").innerHTML = `The table could not be read: ${esc(body.detail || response.status)} ` +
          '<button type="button" class="small-button secondary" id="error-reset">Clear filters and sort</button>';
        $("table-error").hidden = false;
        return;
      }
      $("table-error").hidden = true;
      if (state.offset && state.offset >= body.total && body.total > 0) { // the page emptied
        state.offset = Math.floor((body.total - 1) / state.limit) * state.limit;
        again = true;
      }
      render(body);
    })();
    try { await inFlight; } catch (error) {
      $("table-error").textContent = "The table could not be read: the server is unreachable.";
      $("table-error").hidden = false;
    } finally {
      inFlight = null;
      if (again) { again = false; load(); }
    }
  }

  function reload() { state.offset = 0; load(); }
  $("table-error").addEventListener("click", (e) => {
    if (e.target.id !== "error-reset") return;
    Object.assign(state, { sort: "-created_at", where: [], offset: 0 });
    state.statuses.clear();
    load();
  });

  // Re-rendering a part keeps the keyboard's place in it (a live refresh comes every second).
  function keepFocus(part, draw) {
    const active = document.activeElement;
    const inside = active && part.contains(active);
    const tr = inside && active.closest("tr[data-run]");
    const th = inside && active.closest("[data-col]");
    const at = inside && active.closest("td") ? [...active.closest("tr").children].indexOf(active.closest("td")) : -1;
    draw();
    if (!inside) return;
    let again = null;
    if (tr) again = part.querySelector(`tr[data-run="${CSS.escape(tr.dataset.run)}"]`)?.children[at]?.querySelector("a, button");
    else if (th) again = part.querySelector(`button[data-col="${CSS.escape(th.dataset.col)}"]`);
    if (again) again.focus();
  }

  // -- rendering ------------------------------------------------------------------------------
  function render(body) {
    data = body;
    const key = body.columns.map((c) => c.id).join("\n");
    if (key !== columnsKey) {
      columnsKey = key;
      // Columns hidden but not (yet) in the table stay hidden: a metric not logged so far.
      if (!chosen) defaultColumns();
      pickDefaults();
      renderChooser();
      renderFilterColumns();
      renderChartControls();
    }
    const empty = body.run_count === 0;
    $("sweep-empty").hidden = !empty;
    $("sweep-body").hidden = empty;
    $("sweep-run-count").textContent = body.run_count;
    keepFocus($("sweep-table").tHead, renderHead);
    keepFocus($("sweep-table").tBodies[0], renderRows);
    Phone.note(data, state);
    renderChips();
    $("sweep-status").textContent = AgentSysLive.statusWord(body.sweep.status);
    $("sweep-status").className = `pill ${body.sweep.status}`;
    const end = state.offset + (body.groups || body.rows).length;
    $("group-toggle").hidden = !(body.seed_params || []).length && !state.group;
    $("group-seed").checked = state.group;
    $("group-note").hidden = !grouped();
    $("table-range").textContent = !body.total ? "" : grouped()
      ? `groups ${state.offset + 1}–${end} of ${body.total} (${body.runs_total} runs${body.runs_total !== body.run_count ? `, ${body.run_count} in the sweep` : ""})`
      : `rows ${state.offset + 1}–${end} of ${body.total}` + (body.total !== body.run_count ? ` (${body.run_count} in the sweep)` : "");
    $("no-match").hidden = empty || body.total > 0;
    $("page-prev").disabled = state.offset === 0;
    $("page-next").disabled = end >= body.total;
    $("csv-link").href = `/api/sweeps/${encodeURIComponent(sweepId)}/table?${(() => { const q = query(false); q.set("format", "csv"); return q; })()}`;
    const here = query(true).toString();
    window.history.replaceState(null, "", window.location.pathname + (here ? `?${here}` : ""));
    drawChart();
    if (!drawn) {
      drawn = true;
      performance.mark("sweep-table-drawn");
      document.body.dataset.sweepDrawnAt = String(performance.now()); // bench/ui.py reads it
    }
    document.body.dataset.sweepRows = String(body.rows.length);
  }

  // Until the person chooses: every column, but with many metrics only each one's last value
  // (min and max are a click away, under Columns): 5 metrics are 5 columns, not 15.
  function defaultColumns() {
    const metrics = data.columns.filter((c) => c.kind === "metric");
    state.hidden = new Set(metrics.length > 6 ? metrics.filter((c) => c.stat !== "last").map((c) => c.id) : []);
  }

  function pickDefaults() {
    const metrics = data.columns.filter((c) => c.kind === "metric");
    if (!state.metric || !column(state.metric)) {
      const best = LOSS.map((k) => `metric.${k}.last`).find((id) => column(id));
      state.metric = best || (metrics.find((c) => c.stat === "last") || {}).id || null;
    }
    const params = data.columns.filter((c) => c.kind === "param");
    if (!state.x || !column(state.x)) state.x = (params[0] || {}).id || null;
  }

  function group(c) {
    if (c.kind === "param") return "params";
    if (c.kind === "metric") return `metric:${c.key}`;
    return "run";
  }

  function renderHead() {
    const columns = shown();
    let groups = "";
    for (let i = 0; i < columns.length;) {
      const g = group(columns[i]);
      let span = 0;
      while (i < columns.length && group(columns[i]) === g) { span++; i++; }
      const label = g === "run" ? "" : g === "params" ? "params" : g.slice(7);
      groups += `<th scope="colgroup" colspan="${span}" class="group ${g === "run" ? "" : "start"}">${esc(label)}</th>`;
    }
    const sortId = state.sort.replace(/^-/, "");
    const cells = columns.map((c) => {
      const sorted = c.id === sortId ? (state.sort.startsWith("-") ? "descending" : "ascending") : "none";
      const label = c.kind === "metric" ? c.stat : RUN_LABELS[c.id] || c.label;
      const first = c.kind !== "run" && (columns.indexOf(c) === 0 || group(columns[columns.indexOf(c) - 1]) !== group(c));
      const cls = [c.type === "number" ? "num" : "", first ? "start" : "", c.id === "name" ? "sticky" : ""].join(" ").trim();
      const arrow = sorted === "ascending" ? "▲" : sorted === "descending" ? "▼" : "";
      const how = grouped() && c.kind === "metric" ? ` (groups by their mean: ${Groups.HOW})` : "";
      return `<th scope="col" class="${cls}" aria-sort="${sorted}" data-col="${esc(c.id)}"><button type="button" class="sort" data-col="${esc(c.id)}" title="Sort by ${esc(c.label)}${esc(how)}">${esc(label)}<span class="arrow" aria-hidden="true">${arrow}</span></button></th>`;
    });
    $("sweep-table").tHead.innerHTML = `<tr class="groups">${groups}</tr><tr>${cells.join("")}</tr>`;
  }

  // A run a stop rule ended says which, with the value that met it.
  function stoppedBy(row) {
    if (!row.stopped_by) return "";
    return `<span class="stopped-by-cell" title="Stopped: ${esc(row.stopped_by)}">${esc(row.stopped_by)}</span>`;
  }

  function cell(row, c, start) {
    const value = S.valueOf(row, c);
    const cls = start ? " start" : "";
    if (c.id === "name") {
      // A phone shows no status column: the rule that stopped a run goes under its name.
      const by = Phone.narrow.matches ? stoppedBy(row) : "";
      return `<td class="name sticky"><a href="${esc(row.url || runLink(row.run_id))}"><bdi>${esc(row.name)}</bdi></a> <span class="muted small mono">${esc(row.run_id)}</span>${by}</td>`;
    }
    if (c.id === "status") {
      return `<td><span class="pill ${esc(row.status)}">${esc(AgentSysLive.statusWord(row.status))}</span>${stoppedBy(row)}</td>`;
    }
    if (c.id === "created_at" || c.id === "finished_at") {
      return `<td class="muted nowrap${cls}" title="${esc(value || "")}">${value ? esc(ago(value)) : ""}</td>`;
    }
    if (c.id === "duration_s") return `<td class="num${cls}">${value === undefined ? "" : esc(seconds(value))}</td>`;
    const f = S.format(value, c);
    const num = typeof value === "number" || f.bad ? " num" : "";
    if (c.kind === "metric" && value !== undefined) {
      const m = row.metrics[c.key];
      const title = `${c.key} ${c.stat} · step ${m.last_step} · ${m.points} points${m.source ? ` · from ${m.source}` : ""}`;
      return `<td class="${num.trim()}${cls}"><a class="metric${f.bad ? " nan" : ""}" href="${esc(runLink(row.run_id, c))}" title="${esc(title)}">${esc(f.text)}</a></td>`;
    }
    return `<td class="${num.trim()}${cls}">${esc(f.text)}</td>`;
  }

  function renderRows() {
    const columns = shown();
    const starts = columns.map((c, i) => c.kind !== "run" && (i === 0 || group(columns[i - 1]) !== group(c)));
    if (grouped()) { $("sweep-table").tBodies[0].innerHTML = Groups.rows(data, columns, starts, cell, lit); return; }
    $("sweep-table").tBodies[0].innerHTML = data.rows
      .map((row) => `<tr data-run="${esc(row.run_id)}"${row.run_id === lit ? ' class="hl"' : ""}>${columns.map((c, i) => cell(row, c, starts[i])).join("")}</tr>`)
      .join("");
  }

  function seconds(s) {
    if (typeof s !== "number") return "";
    if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.round(s)}s`;
    const m = Math.floor(s / 60);
    if (m < 60) return `${m}m ${String(Math.round(s % 60)).padStart(2, "0")}s`;
    return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, "0")}m`;
  }

  function ago(iso) {
    const s = (Date.now() - Date.parse(iso)) / 1000;
    if (!Number.isFinite(s)) return iso;
    if (s < 60) return "just now";
    if (s < 3600) return `${Math.floor(s / 60)}m ago`;
    if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
    return new Date(iso).toLocaleDateString();
  }

  // -- highlighting, both ways ---------------------------------------------------------------
  function light(id) {
    if (id === lit) return;
    const body = $("sweep-table").tBodies[0];
    if (lit) body.querySelector(`tr[data-run="${CSS.escape(lit)}"]`)?.classList.remove("hl");
    lit = id;
    if (id) body.querySelector(`tr[data-run="${CSS.escape(id)}"]`)?.classList.add("hl");
    chart.highlight(id);
  }

  $("sweep-table").addEventListener("mouseover", (e) => {
    const tr = e.target.closest("tbody tr[data-run]");
    if (tr) light(tr.dataset.run);
  });
  $("sweep-table").addEventListener("mouseleave", () => light(null));
  $("sweep-table").addEventListener("focusin", (e) => {
    const tr = e.target.closest("tbody tr[data-run]");
    if (tr) light(tr.dataset.run);
  });

  // -- sorting and paging ----------------------------------------------------------------------
  $("sweep-table").addEventListener("click", (e) => {
    const expand = e.target.closest("button.expand");
    if (expand) { Groups.toggle(expand.dataset.group); keepFocus($("sweep-table").tBodies[0], renderRows); return; }
    const button = e.target.closest("button.sort");
    if (!button) return;
    const id = button.dataset.col;
    state.sort = state.sort === id ? `-${id}` : id;
    button.focus(); // a click on it, too, so that its place is kept when the header is redrawn
    reload();
  });
  $("page-prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - state.limit); load(); });
  $("page-next").addEventListener("click", () => { state.offset += state.limit; load(); });
  $("group-seed").addEventListener("change", (e) => { state.group = e.target.checked; reload(); });
  $("page-size").value = String(state.limit);
  $("page-size").addEventListener("change", (e) => { state.limit = Number(e.target.value); reload(); });

  // -- the chart's controls --------------------------------------------------------------------
  function options(select, columns, chosen) {
    select.innerHTML = columns.map((c) => `<option value="${esc(c.id)}"${c.id === chosen ? " selected" : ""}>${esc(c.label)}</option>`).join("");
  }

  function renderChartControls() {
    options($("chart-metric"), data.columns.filter((c) => c.kind === "metric"), state.metric);
    options($("chart-x"), data.columns.filter((c) => c.kind === "param"), state.x);
    for (const radio of document.querySelectorAll("input[name=chart-mode]")) radio.checked = radio.value === state.mode;
  }

  function drawChart() {
    const scatter = state.mode === "scatter";
    for (const el of document.querySelectorAll(".chart-x")) el.hidden = !scatter;
    const metric = chartMetric();
    // A group's seeds are many: no seed axis for groups.
    const axes = shown().filter((c) => c.kind === "param" && !(grouped() && data.seed_params.includes(c.id)));
    const x = state.x && column(state.x);
    $("chart-note").hidden = false;
    $("chart-note").textContent = !metric
      ? "No metric logged yet: the chart colours the runs once they log one."
      : !axes.length && !scatter
        ? "No params shown: each run is a dot on the metric's axis (params shown under Columns become axes of their own)."
      : scatter
        ? `Each dot is a run of this page: ${x ? x.label : "(no param)"} against ${metric.label}. Hover a dot or a row to pick it out; click a dot to open its run.`
        : `Each line is a run of this page, coloured by ${metric.label} (dark: low, yellow: high); a run without one of the params passes over its axis. Hover a line or a row to pick it out; click a line to open its run.`;
    if (grouped()) { // the same words, of groups: "Each line is a group of this page, ..."
      $("chart-note").textContent = $("chart-note").textContent.replace(/(a|its) run\b/g, "$1 group").replace(/runs\b/, "groups") +
        " A group is drawn at its mean over its done runs, with a bar from their min to their max; click it to open its runs.";
    }
    chart.draw({ mode: scatter && x ? "scatter" : "parallel", rows: grouped() ? Groups.chartRows(data) : data.rows, axes, metric, x });
  }

  $("chart-metric").addEventListener("change", (e) => { state.metric = e.target.value; save(); drawChart(); });
  $("chart-x").addEventListener("change", (e) => { state.x = e.target.value; save(); drawChart(); });
  for (const radio of document.querySelectorAll("input[name=chart-mode]")) {
    radio.addEventListener("change", (e) => { state.mode = e.target.value; save(); drawChart(); });
  }
  // Turned to or from a phone's width: the columns that fit it.
  Phone.narrow.addEventListener("change", () => { if (data) { renderHead(); renderRows(); Phone.note(data, state); drawChart(); } });
  let width = 0;
  new ResizeObserver((entries) => {
    const w = Math.round(entries[0].contentRect.width);
    if (data && w !== width) { width = w; drawChart(); }
  }).observe($("sweep-chart"));

  // -- columns chosen ------------------------------------------------------------------------
  function renderChooser() {
    const box = (c) => `<label class="toggle"><input type="checkbox" data-col="${esc(c.id)}"${state.hidden.has(c.id) ? "" : " checked"}${c.id === "name" ? " disabled" : ""}> ${esc(c.label)}</label>`;
    const part = (title, kind) => {
      const cs = data.columns.filter((c) => c.kind === kind);
      return cs.length ? `<fieldset><legend>${title}</legend>${cs.map(box).join("")}</fieldset>` : "";
    };
    $("columns-list").innerHTML = part("Run", "run") + part("Params", "param") + part("Metrics", "metric") +
      `<button type="button" class="small-button secondary" id="columns-all">Show all</button>`;
  }
  $("columns-list").addEventListener("change", (e) => {
    const id = e.target.dataset.col;
    if (!id) return;
    if (e.target.checked) state.hidden.delete(id); else state.hidden.add(id);
    save();
    renderHead();
    renderRows();
    drawChart();
  });
  $("columns-list").addEventListener("click", (e) => {
    if (e.target.id !== "columns-all") return;
    state.hidden.clear();
    save();
    renderChooser();
    renderHead();
    renderRows();
    drawChart();
  });

  window.AgentSysSweepTable = { load, state, light, get data() { return data; } };
  function renderFilterColumns() { window.AgentSysSweepFilters?.columns(); }
  function renderChips() { window.AgentSysSweepFilters?.chips(); }

  // -- live -------------------------------------------------------------------------------------
  let timer = null;
  function soon() {
    if (timer) return;
    timer = window.setTimeout(() => { timer = null; load(); }, 1000);
  }
  function onEvent(event) {
    const payload = event.payload || {};
    if (event.kind && event.kind.startsWith("alert")) return;
    const known = data && data.rows.length && "agent_id" in data.rows[0]
      ? data.rows.some((r) => r.agent_id === event.agent_id) : true;
    if (event.kind === "metrics" && known) soon();
    else if (AgentSysLive.RUN_STATUSES.has(payload.status)) soon(); // a run of any page may have moved
  }

  // live.js is deferred: it (and the status words) are there once the DOM is.
  document.addEventListener("DOMContentLoaded", () => {
    window.AgentSysSweepFilters?.init({ state, reload, column: (id) => data && column(id), data: () => data });
    AgentSysLive.follow("/ws/agents/events/", onEvent, { after: page.dataset.feedAfter });
    load();
  });
})();
