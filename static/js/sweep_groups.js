// A sweep's table grouped by seed (GET /api/sweeps/{id}/table?group=seed, grouped on the
// server: scheduler_app/sweeps/groups.py): one row a group of runs whose params are equal but
// for a seed, each metric cell its mean ± sample standard deviation over the group's done
// runs, with n = done runs with a value / runs in the group (min – max on hover); a click on
// the group's name opens its runs below it, each a row as in the plain table. The chart draws
// each group as one line (or dot) at its mean, with a bar from min to max on the metric.
(function () {
  "use strict";
  const S = window.AgentSysSweep;
  const esc = (t) => String(t).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  const open = new Set(); // the groups opened, kept open over live refreshes and pages
  const isGroup = (id) => typeof id === "string" && id.startsWith("group-");
  const HOW = "mean ± sample standard deviation over the group's done runs; n = done runs with a value / runs in the group";

  function eachStat(g, pick) {
    const out = {};
    for (const [key, stats] of Object.entries(g.metrics)) {
      out[key] = {};
      for (const [stat, s] of Object.entries(stats)) out[key][stat] = pick(s);
    }
    return out;
  }

  // Groups as rows the chart draws (it reads run_id, name, params and metrics of each).
  function chartRows(data) {
    return data.groups.map((g) => ({
      run_id: g.id,
      name: `A group of ${g.count} run${g.count === 1 ? "" : "s"} (seeds ${g.seeds.filter((s) => s !== null).join(", ") || "none"})`,
      params: g.params,
      metrics: eachStat(g, (s) => (s.mean === null ? undefined : s.mean)),
      spread: eachStat(g, (s) => s),
    }));
  }

  function statCell(g, c, cls) {
    const s = (g.metrics[c.key] || {})[c.stat];
    if (!s) return `<td class="${cls}"></td>`;
    const mean = s.mean === null ? "—" : S.format(s.mean, c).text;
    const std = s.std === null ? "" : ` <span class="muted">± ${esc(S.format(s.std, c).text)}</span>`;
    const bad = s.bad ? ` <span class="nan">${s.bad} NaN</span>` : "";
    const range = s.n ? `; min ${S.format(s.min, c).text} – max ${S.format(s.max, c).text}` : "";
    const title = `${c.key} ${c.stat}: mean ± sample std dev over ${s.n} done run${s.n === 1 ? "" : "s"} with a value, of ${s.count}${range}${s.bad ? `; ${s.bad} done with NaN or ∞` : ""}`;
    return `<td class="${cls} group-stat" title="${esc(title)}">${esc(mean)}${std} <span class="n">n=${s.n}/${s.count}</span>${bad}</td>`;
  }

  function cell(g, c, start, data) {
    const cls = (c.type === "number" ? "num" : "") + (start ? " start" : "");
    if (c.id === "name") {
      const shut = !open.has(g.id);
      return `<td class="name sticky"><button type="button" class="expand" data-group="${esc(g.id)}" aria-expanded="${!shut}" title="${shut ? "Show" : "Hide"} its runs">${shut ? "▸" : "▾"} ${g.count} run${g.count === 1 ? "" : "s"}</button></td>`;
    }
    if (c.id === "status") {
      const order = document.getElementById("sweep-page").dataset.statuses.split(","); // the server's
      const pills = Object.entries(g.statuses).sort(([a], [b]) => order.indexOf(a) - order.indexOf(b)).map(([s, n]) => `<span class="pill ${esc(s)}">${n} ${esc(AgentSysLive.statusWord(s))}</span>`);
      return `<td class="statuses">${pills.join(" ")}</td>`;
    }
    if (c.kind === "metric") return statCell(g, c, cls.trim());
    if (c.kind === "param" && data.seed_params.includes(c.id)) {
      const seeds = g.seeds.filter((s) => s !== null && s !== undefined).map(String);
      return `<td class="${cls.trim()} muted" title="${esc(seeds.join(", "))}">${esc(seeds.join(", "))}</td>`;
    }
    if (c.kind === "param") return `<td class="${cls.trim()}">${esc(S.format(g.params[c.id.slice(6)], c).text)}</td>`;
    return `<td class="${cls.trim()}"></td>`;
  }

  // Each group's row, and its runs' rows below it (hidden while it is shut), drawn by
  // `runCell` as the plain table draws a run's.
  function rows(data, columns, starts, runCell, lit) {
    const byId = new Map(data.rows.map((r) => [r.run_id, r]));
    return data.groups.map((g) => {
      const hl = g.id === lit ? " hl" : "";
      let out = `<tr class="group${hl}" data-run="${esc(g.id)}">${columns.map((c, i) => cell(g, c, starts[i], data)).join("")}</tr>`;
      for (const id of g.run_ids) {
        const row = byId.get(id);
        if (!row) continue;
        const cls = `member${id === lit ? " hl" : ""}`;
        out += `<tr class="${cls}" data-run="${esc(id)}" data-of="${esc(g.id)}"${open.has(g.id) ? "" : " hidden"}>${columns.map((c, i) => runCell(row, c, starts[i])).join("")}</tr>`;
      }
      return out;
    }).join("");
  }

  function toggle(id, force) {
    const show = force === undefined ? !open.has(id) : force;
    if (show) open.add(id); else open.delete(id);
  }

  window.AgentSysSweepGroups = { chartRows, rows, toggle, isGroup, HOW };
})();
