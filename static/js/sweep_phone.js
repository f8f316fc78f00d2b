// A sweep's table on a phone (max-width 640px, as app.css): each run's name, the one metric
// that matters (the sorted one, else the chart's) right beside it, then its params, so
// nothing that matters hides behind a sideways scroll; the other columns are on a wider
// screen and in the CSV. A line above the table says so, and says when the params alone
// still need a scroll (many params, long values): the metric is never the one cut off.
(function () {
  "use strict";
  const narrow = window.matchMedia("(max-width: 640px)");

  function keyMetric(data, state) {
    const find = (id) => data.columns.find((c) => c.id === id);
    const sorted = find(state.sort.replace(/^-/, ""));
    if (sorted && sorted.kind === "metric") return sorted;
    return (state.metric && find(state.metric)) || null;
  }

  // The columns to draw: those chosen, or on a phone the few that matter of them.
  function columns(chosen, data, state) {
    if (!narrow.matches) return chosen;
    const key = keyMetric(data, state);
    const name = data.columns.filter((c) => c.id === "name");
    const params = data.columns.filter((c) => c.kind === "param" && chosen.includes(c));
    return [...name, ...(key ? [key] : []), ...params];
  }

  function note(data, state) {
    const line = document.getElementById("phone-note");
    line.hidden = !narrow.matches;
    if (line.hidden) return;
    const key = keyMetric(data, state);
    const wrap = document.querySelector(".sweep-table-wrap");
    const sideways = wrap.scrollWidth > wrap.clientWidth + 1;
    line.textContent =
      `On a narrow screen: each run's ${key ? `${key.label} and ` : ""}params; ` +
      "the other columns are on a wider screen and in the CSV." +
      (sideways ? " Scroll the table sideways for the rest of the params →" : "");
  }

  window.AgentSysSweepPhone = { narrow, columns, note };
})();
