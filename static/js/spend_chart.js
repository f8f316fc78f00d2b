// The Spend page's chart: dollars a day, one line a group, drawn with charts.js (uPlot).
(function () {
  "use strict";
  const el = document.getElementById("spend-chart");
  const data = document.getElementById("spend-by-day");
  if (!el || !data || !window.AgentSysCharts) return;
  const rows = JSON.parse(data.textContent);
  const DAY = 86400;
  const byGroup = new Map();
  for (const row of rows) {
    const day = Date.parse(row.day + "T00:00:00Z") / 1000 / DAY;
    if (!byGroup.has(row.key)) byGroup.set(row.key, { steps: [], values: [] });
    const line = byGroup.get(row.key);
    line.steps.push(day);
    line.values.push(row.llm_usd);
  }
  if (!byGroup.size) {
    el.textContent = "No spend in these days.";
    return;
  }
  const lines = [...byGroup].map(([key, series]) => ({ label: key || "(none)", series }));
  window.AgentSysCharts.lineChart(el, "USD a day (x: days since 1970)", lines);
})();
