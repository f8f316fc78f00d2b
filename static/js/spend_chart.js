// The Spend page's chart: dollars a day, one line a group, drawn with charts.js (uPlot).
// Every day from the first with spend to today is a point of every line: a day on which a
// group spent nothing is $0 (a gap would read as "not known"). A week at least: one day of
// spend alone drew a lone point with no date under it.
(function () {
  "use strict";
  const el = document.getElementById("spend-chart");
  const data = document.getElementById("spend-by-day");
  if (!el || !data || !window.AgentSysCharts) return;
  const rows = JSON.parse(data.textContent);
  if (!rows.length) {
    el.textContent = "No spend in these days.";
    return;
  }
  const DAY = 86400 * 1000;
  const dayOf = (iso) => Math.round(Date.parse(iso + "T00:00:00Z") / DAY);
  const last = Math.max(dayOf(new Date().toISOString().slice(0, 10)), ...rows.map((row) => dayOf(row.day)));
  const first = Math.min(last - 6, ...rows.map((row) => dayOf(row.day)));
  const days = [];
  for (let day = first; day <= last; day++) days.push(day);
  const byGroup = new Map();
  for (const row of rows) {
    if (!byGroup.has(row.key)) byGroup.set(row.key, new Map());
    const spent = byGroup.get(row.key);
    spent.set(dayOf(row.day), (spent.get(dayOf(row.day)) || 0) + row.llm_usd);
  }
  const lines = [...byGroup].map(([key, spent]) => ({
    label: key || "(none)",
    series: { steps: days, values: days.map((day) => spent.get(day) || 0) },
  }));
  const date = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric", timeZone: "UTC" });
  window.AgentSysCharts.lineChart(el, "USD a day", lines, {
    xLabel: "day",
    xTick: (day) => (Number.isInteger(day) ? date.format(new Date(day * DAY)) : ""),
    xIncrs: [1, 2, 7, 14, 28],
  });
})();
