// Durations that tick: an element with data-ticking-seconds (the run's seconds when the
// server rendered it, see the run_duration template tag) counts on from the moment this page
// first saw it, once a second, written as the server writes durations (1h 02m, 3m 05s, 12s).
// Re-rendered sections (htmx) bring their own seconds; removing the attribute stops a tick.
(function () {
  "use strict";
  const seen = new WeakMap(); // element -> performance.now() when first seen

  function format(total) {
    const seconds = Math.max(0, Math.floor(total));
    const hours = Math.floor(seconds / 3600);
    const minutes = Math.floor((seconds % 3600) / 60);
    const rest = seconds % 60;
    const two = (n) => String(n).padStart(2, "0");
    if (hours) return `${hours}h ${two(minutes)}m`;
    if (minutes) return `${minutes}m ${two(rest)}s`;
    return `${rest}s`;
  }

  function tick() {
    const now = performance.now();
    for (const el of document.querySelectorAll("[data-ticking-seconds]")) {
      if (!seen.has(el)) seen.set(el, now);
      const base = Number(el.dataset.tickingSeconds);
      if (Number.isFinite(base)) el.textContent = format(base + (now - seen.get(el)) / 1000);
    }
  }

  window.setInterval(tick, 1000);
  document.addEventListener("DOMContentLoaded", tick);
  window.AgentSysDurations = { format, tick };
})();
