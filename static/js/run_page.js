// The run page: every numeric series charted by step, the log's tail, both kept live.
// New metric points come when the run's executor reports a "metrics" event on the agents
// feed (fetched from the last drawn step on); the log is polled from its last byte while the
// run is live. Paging back through a long log reads 64 KiB at a time: it is never loaded whole.
(function () {
  "use strict";
  const CHUNK = 65536;
  const page = document.getElementById("run-page");
  const runId = page.dataset.run;
  const agentId = page.dataset.agent;
  let live = page.dataset.live === "1";
  const charts = new Map();
  const api = (path) => `/api/runs/${encodeURIComponent(runId)}${path}`;

  // -- metrics ------------------------------------------------------------------------------
  function figureFor(key) {
    let figure = document.querySelector(`figure.chart[data-key="${CSS.escape(key)}"]`);
    if (!figure) {
      figure = document.createElement("figure");
      figure.className = "chart";
      figure.dataset.key = key;
      figure.id = `metric-${key}`;
      figure.innerHTML = "<figcaption></figcaption><div class='plot'></div>";
      figure.querySelector("figcaption").textContent = key;
      document.getElementById("charts").appendChild(figure);
      document.getElementById("no-metrics").hidden = true;
    }
    return figure;
  }

  // The words the server's template uses (MetricSeries.source's choices).
  const SOURCE_WORDS = {
    jsonl: "agent_metrics.jsonl",
    tensorboard: "TensorBoard",
    mlflow: "MLflow",
    wandb: "W&B",
    stdout: "printed lines",
  };

  function caption(figure, series) {
    const last = typeof series.last_value === "number" ? series.last_value.toPrecision(4) : series.last_value;
    figure.querySelector("figcaption").innerHTML = "";
    figure.querySelector("figcaption").append(series.key + " ");
    const note = document.createElement("span");
    note.className = "muted";
    const from = SOURCE_WORDS[series.source] ? ` · from ${SOURCE_WORDS[series.source]}` : "";
    note.textContent = `last ${last} · ${series.points} points${from}`;
    figure.querySelector("figcaption").append(note);
  }

  // A series spanning many orders of magnitude (a loss gone to 1e305) is drawn on a log scale,
  // said under the heading, unless the person chose the scale themselves.
  const logScale = document.getElementById("log-scale");
  let scaleChosen = false;
  function fitScale(seriesList) {
    const wide = seriesList.find((s) => AgentSysCharts.needsLog(s));
    if (!wide || scaleChosen || logScale.checked) return;
    logScale.checked = true;
    for (const chart of charts.values()) chart.setLog(true);
    const note = document.getElementById("scale-note");
    note.textContent = `Log scale is on: ${wide.key} spans ${AgentSysCharts.tickLabel(wide.min_value)} to ` +
      `${AgentSysCharts.tickLabel(wide.max_value)}.`;
    note.hidden = false;
  }

  async function loadMetrics() {
    const body = await AgentSysLive.getJSON(api("/metrics?max_points=2000"));
    for (const series of body.series) {
      const figure = figureFor(series.key);
      caption(figure, series);
      charts.set(series.key, AgentSysCharts.lineChart(figure.querySelector(".plot"), "", [{ label: series.key, series }]));
    }
    fitScale(body.series);
    showTarget();
    document.body.dataset.chartsReady = "1";
    document.body.dataset.chartsReadyAt = String(performance.now()); // bench/ui.py reads it
  }

  // A link to one of its metrics (#metric-<key>, as the sweep table's numbers are): that
  // chart is scrolled to and outlined once drawn (the browser's own jump came before the
  // charts took their height, so it landed off).
  function showTarget() {
    const hash = window.location.hash;
    if (!hash.startsWith("#metric-")) return;
    let key = hash.slice(8);
    try { key = decodeURIComponent(key); } catch (error) { /* a malformed escape: as written */ }
    const figure = document.querySelector(`figure.chart[data-key="${CSS.escape(key)}"]`);
    if (!figure) return;
    for (const other of document.querySelectorAll("figure.chart.target")) other.classList.remove("target");
    figure.classList.add("target");
    figure.scrollIntoView({ block: "center" });
  }
  window.addEventListener("hashchange", showTarget);

  let fetching = false;
  let again = false;
  async function newPoints() {
    if (fetching) { again = true; return; }
    fetching = true;
    try {
      const since = Math.min(...[...charts.values()].map((c) => c.lastStep(0) ?? -1)) + 1;
      const from = Number.isFinite(since) ? `&since_step=${since}` : "";
      const body = await AgentSysLive.getJSON(api(`/metrics?max_points=2000${from}`));
      for (const series of body.series) {
        const figure = figureFor(series.key);
        caption(figure, series);
        if (charts.has(series.key)) charts.get(series.key).append(0, series);
        else {
          const chart = AgentSysCharts.lineChart(figure.querySelector(".plot"), "", [{ label: series.key, series }]);
          if (logScale.checked) chart.setLog(true);
          charts.set(series.key, chart);
        }
      }
      fitScale(body.series);
    } finally {
      fetching = false;
      if (again) { again = false; newPoints(); }
    }
  }

  logScale.addEventListener("change", (e) => {
    scaleChosen = true;
    document.getElementById("scale-note").hidden = true;
    for (const chart of charts.values()) chart.setLog(e.target.checked);
  });

  // -- log ----------------------------------------------------------------------------------
  const log = document.getElementById("log");
  const follow = document.getElementById("log-follow");
  const older = document.getElementById("log-older");
  let start = 0; // first byte shown
  let end = 0; // next byte to read

  // Bytes as a person reads them: a short log is "120 bytes", never "0.1 KiB" or "0.0 KiB".
  function sizeWords(n) {
    if (n < 1024) return `${n} byte${n === 1 ? "" : "s"}`;
    if (n < 1048576) return (n / 1024).toFixed(n < 10240 ? 1 : 0) + " KiB";
    return (n / 1048576).toFixed(n < 10485760 ? 1 : 0) + " MiB";
  }

  function sizeNote(size) {
    const shown = end - start;
    let words = "The log is empty so far.";
    if (size && shown >= size) words = `the whole log, ${sizeWords(size)}`;
    else if (size) words = `showing ${sizeWords(shown)} of ${sizeWords(size)}`;
    document.getElementById("log-size").textContent = words;
    older.disabled = start === 0;
  }

  // A log served from the database stops at its host's cap: say where the rest is.
  function cappedNote(chunk) {
    const note = document.getElementById("log-capped");
    if (!chunk.capped || !note.hidden) return;
    document.getElementById("log-cap").textContent = `${Math.floor(chunk.size / 1048576)} MiB`;
    document.getElementById("log-host").textContent = chunk.host;
    note.hidden = false;
  }

  async function loadLogTail() {
    const probe = await AgentSysLive.getJSON(api(`/logs?offset=${Number.MAX_SAFE_INTEGER}&limit=1`));
    start = Math.max(0, probe.size - CHUNK);
    const chunk = await AgentSysLive.getJSON(api(`/logs?offset=${start}&limit=${CHUNK}`));
    log.textContent = chunk.text;
    end = chunk.next_offset;
    sizeNote(chunk.size);
    cappedNote(chunk);
    log.scrollTop = log.scrollHeight;
  }

  async function pollLog() {
    const chunk = await AgentSysLive.getJSON(api(`/logs?offset=${end}&limit=${CHUNK * 4}`));
    if (chunk.text) {
      log.append(chunk.text);
      end = chunk.next_offset;
      if (follow.checked) log.scrollTop = log.scrollHeight;
    }
    sizeNote(chunk.size);
    cappedNote(chunk);
    return chunk.next_offset < chunk.size; // more already waiting
  }

  older.addEventListener("click", async () => {
    const from = Math.max(0, start - CHUNK);
    const chunk = await AgentSysLive.getJSON(api(`/logs?offset=${from}&limit=${start - from}`));
    const height = log.scrollHeight;
    log.prepend(chunk.text);
    start = from;
    log.scrollTop += log.scrollHeight - height; // keep the reader's place
    sizeNote(chunk.size);
  });
  log.addEventListener("wheel", (e) => { if (e.deltaY < 0) follow.checked = false; });

  async function logLoop() {
    while (live) {
      let more = false;
      try { more = await pollLog(); } catch (error) { /* the server is back soon: poll again */ }
      await new Promise((r) => setTimeout(r, more ? 50 : 1000));
    }
    await pollLog(); // the lines written just before it ended
  }

  // -- status -------------------------------------------------------------------------------
  const LIVE = new Set(["queued", "running", "paused"]);
  // The server renders the section again (htmx): actions, exit code, alerts stay its own.
  // One render of a section at a time, and one more after it when events came meanwhile: the
  // swap replaces the element a second request would be queued on, and htmx dropped that
  // request, so a run that went running → done within one render stayed "running".
  const rendering = new Map(); // part -> true when an event came during its render
  function refresh(part, target) {
    if (rendering.has(part)) {
      rendering.set(part, true);
      return;
    }
    rendering.set(part, false);
    htmx
      .ajax("GET", `${window.location.pathname}?part=${part}`, { target, swap: "outerHTML" })
      .catch(() => {})
      .finally(() => {
        const again = rendering.get(part);
        rendering.delete(part);
        if (again) refresh(part, target);
      });
  }

  function onEvent(event) {
    if (event.agent_id !== agentId) return;
    if (event.kind === "metrics") newPoints();
    if (event.kind.startsWith("alert")) {
      refresh("alerts", "#run-alerts-card");
      return;
    }
    const status = event.payload && event.payload.status;
    if (AgentSysLive.RUN_STATUSES.has(status)) { // not an alert's own status
      const badge = document.getElementById("run-status");
      badge.textContent = AgentSysLive.statusWord(status);
      badge.className = "pill " + status;
      refresh("head", "#run-head");
      if (!LIVE.has(status) && live) {
        live = false;
        newPoints();
      }
    }
  }

  document.addEventListener("DOMContentLoaded", async () => {
    if (agentId) AgentSysLive.follow("/ws/agents/events/", onEvent, { after: page.dataset.feedAfter });
    await Promise.all([loadMetrics(), loadLogTail()]);
    logLoop();
  });
})();
