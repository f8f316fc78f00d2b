// The sweep table's filters: status checkboxes, and clauses built one at a time (a param's
// value, a metric's or a number's range, a name that contains...), each shown as a chip that
// removes it. They become the API's `status=` and `where=<column>:<op>:<value>` (the server
// filters, so 10^4 runs filter as fast as 10).
(function () {
  "use strict";
  // Every run status, in the server's order (its page says them: none is ever missing here).
  const STATUSES = (document.getElementById("sweep-page").dataset.statuses || "").split(",").filter(Boolean);
  const OPS = { eq: "=", ne: "≠", lt: "<", le: "≤", gt: ">", ge: "≥", contains: "contains" };
  const $ = (id) => document.getElementById(id);
  const esc = (t) => String(t).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  let ctx = null;

  function init(context) {
    ctx = context;
    const box = $("status-filter");
    box.innerHTML = '<span class="muted small">Status</span>' + STATUSES.map((s) =>
      `<label class="toggle small"><input type="checkbox" name="status" value="${s}"${ctx.state.statuses.has(s) ? " checked" : ""}> ${esc(word(s))}</label>`
    ).join("");
    box.addEventListener("change", (e) => {
      if (e.target.checked) ctx.state.statuses.add(e.target.value); else ctx.state.statuses.delete(e.target.value);
      ctx.reload();
    });
    $("filter-column").addEventListener("change", chooseColumn);
    $("filter-add").addEventListener("click", add);
    for (const id of ["filter-value", "filter-min", "filter-max"]) {
      $(id).addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); add(); } });
    }
    $("filter-chips").addEventListener("click", (e) => {
      const button = e.target.closest("button[data-where]");
      if (!button) return;
      ctx.state.where = ctx.state.where.filter((w) => w !== button.dataset.where);
      ctx.reload();
    });
    $("clear-filters").addEventListener("click", () => {
      ctx.state.where = [];
      ctx.state.statuses.clear();
      for (const input of box.querySelectorAll("input")) input.checked = false;
      ctx.reload();
    });
  }

  // The status words are live.js' (deferred): read them when first drawn, not at load.
  function word(status) {
    return window.AgentSysLive ? AgentSysLive.statusWord(status) : status;
  }

  // Which kind of input a column takes: a range for numbers, a value for the rest.
  function ranged(c) {
    return c.kind === "metric" || (c.type === "number" && c.kind !== "param");
  }

  function columns() {
    const data = ctx.data();
    const group = (title, cs) => (cs.length ? `<optgroup label="${title}">${cs.map((c) => `<option value="${esc(c.id)}">${esc(c.label)}</option>`).join("")}</optgroup>` : "");
    const select = $("filter-column");
    const chosen = select.value;
    select.innerHTML = '<option value="">Filter on…</option>' +
      group("Params", data.columns.filter((c) => c.kind === "param")) +
      group("Metrics", data.columns.filter((c) => c.kind === "metric")) +
      group("Run", data.columns.filter((c) => ["name", "duration_s", "exit_code"].includes(c.id)));
    if (chosen && ctx.column(chosen)) select.value = chosen;
    chooseColumn();
  }

  function chooseColumn() {
    const c = ctx.column($("filter-column").value);
    document.querySelector(".filter-param").hidden = !c || ranged(c);
    document.querySelector(".filter-range").hidden = !c || !ranged(c);
    $("filter-add").hidden = !c;
    if (!c || ranged(c)) return;
    // The values this page shows, to pick from (any other can be typed).
    const seen = new Set(ctx.data().rows.map((r) => AgentSysSweep.valueOf(r, c)).filter((v) => v !== undefined && v !== null).map(String));
    $("filter-values").innerHTML = [...seen].sort().slice(0, 100).map((v) => `<option value="${esc(v)}">`).join("");
    $("filter-value").placeholder = c.id === "name" ? "name contains…" : `${c.label} =`;
  }

  function add() {
    const c = ctx.column($("filter-column").value);
    if (!c) return;
    const clauses = [];
    if (ranged(c)) {
      const low = $("filter-min").value.trim();
      const high = $("filter-max").value.trim();
      if (low && high) clauses.push(`${c.id}:between:${low},${high}`);
      else if (low) clauses.push(`${c.id}:ge:${low}`);
      else if (high) clauses.push(`${c.id}:le:${high}`);
    } else {
      const value = $("filter-value").value.trim();
      if (value) clauses.push(`${c.id}:${c.id === "name" ? "contains" : "eq"}:${value}`);
    }
    if (!clauses.length) return;
    for (const id of ["filter-value", "filter-min", "filter-max"]) $(id).value = "";
    ctx.state.where = [...ctx.state.where.filter((w) => !clauses.includes(w)), ...clauses];
    ctx.reload();
  }

  function describe(clause) {
    const [id, op, ...rest] = clause.split(":");
    const value = rest.join(":");
    const c = ctx.column(id);
    const label = c ? c.label : id;
    if (op === "between") return `${label} ${value.replace(",", " – ")}`;
    return `${label} ${OPS[op] || op} ${value}`;
  }

  function chips() {
    $("filter-chips").innerHTML = ctx.state.where.map((w) =>
      `<li class="chip">${esc(describe(w))} <button type="button" class="chip-x" data-where="${esc(w)}" aria-label="Remove filter ${esc(describe(w))}">×</button></li>`
    ).join("");
    for (const input of $("status-filter").querySelectorAll("input")) input.checked = ctx.state.statuses.has(input.value);
  }

  window.AgentSysSweepFilters = { init, columns, chips };
})();
