// Live feeds: a WebSocket to a Channels feed that reconnects by itself and resumes after the
// last event it saw (?after=<id>), so a dropped connection shows in the top bar, then heals
// with nothing missed. Pages pass the seq they were rendered at, so events between the page
// render and the socket opening are replayed too.
(function () {
  "use strict";
  const followers = new Set();
  // Close codes of events_app/consumers.py after which reconnecting would only fail again.
  const FINAL_CLOSES = { 4401: "logged out: reload to log in", 4404: "not found", 4400: "bad request" };

  function showState() {
    const badge = document.getElementById("live-state");
    if (!badge || followers.size === 0) return;
    const down = [...followers].some((f) => !f.open);
    badge.hidden = false;
    badge.textContent = down ? "reconnecting…" : "live";
    badge.className = "live-state " + (down ? "down" : "up");
  }

  function follow(path, onEvent, options) {
    const opts = options || {};
    const follower = { open: false, last: opts.after, socket: null, closed: false, drops: 0 };
    let delay = 300;
    function connect() {
      const url = new URL(path, window.location.href);
      url.protocol = window.location.protocol === "https:" ? "wss:" : "ws:";
      if (follower.last !== undefined && follower.last !== null && follower.last !== "") {
        url.searchParams.set("after", follower.last);
      }
      const socket = new WebSocket(url);
      follower.socket = socket;
      socket.onopen = () => {
        follower.open = true;
        delay = 300;
        showState();
        if (opts.onOpen) opts.onOpen();
      };
      socket.onmessage = (message) => {
        let event;
        try {
          event = JSON.parse(message.data);
        } catch (error) {
          return; // not JSON: nothing a page could apply
        }
        if (typeof event.id === "number") {
          if (follower.last !== undefined && event.id <= Number(follower.last)) return;
          follower.last = event.id;
        } else if (typeof event.seq === "number") {
          follower.last = event.seq;
        }
        onEvent(event);
      };
      socket.onclose = (closing) => {
        follower.open = false;
        if (follower.closed) return;
        if (closing.code === 4503) watchOutage(); // the database is away: the banner says so
        if (FINAL_CLOSES[closing.code]) { // retrying cannot help: say why, once
          follower.closed = true;
          followers.delete(follower);
          const badge = document.getElementById("live-state");
          if (badge) {
            badge.hidden = false;
            badge.textContent = FINAL_CLOSES[closing.code];
            badge.className = "live-state down";
          }
          return;
        }
        follower.drops += 1;
        showState();
        window.setTimeout(connect, delay);
        delay = Math.min(delay * 2, 5000);
      };
    }
    followers.add(follower);
    connect();
    follower.close = () => {
      follower.closed = true;
      followers.delete(follower);
      if (follower.socket) follower.socket.close();
    };
    return follower;
  }

  async function getJSON(url) {
    const response = await fetch(url, { headers: { Accept: "application/json" } });
    if (response.status === 503) watchOutage();
    if (!response.ok) throw new Error(url + ": " + response.status);
    return response.json();
  }

  // The words a run (and its executor) can be in; alerts carry a status of their own.
  const RUN_STATUSES = new Set([
    "ready", "queued", "running", "paused", "done", "failed", "stopped", "cancelled", "rejected", "lost",
  ]);

  // The word a person reads for a status value: the server's table (common/
  // status_words.py, rendered into every page as #status-words), so a pill updated live
  // reads as the server renders it.
  let words = null;
  function statusWord(status) {
    if (words === null) {
      const table = document.getElementById("status-words");
      try { words = table ? JSON.parse(table.textContent) : {}; } catch (error) { words = {}; }
    }
    const text = status === undefined || status === null ? "" : String(status);
    return Object.prototype.hasOwnProperty.call(words, text) ? words[text] : text.replace(/_/g, " ");
  }

  // A section re-rendered from the server (htmx) when the feed says something moved: at most
  // once per `delay` ms however busy the feed, and never while the person is typing in it.
  function refresher(target, url, delay) {
    let timer = null;
    function refresh() {
      if (timer) return;
      timer = window.setTimeout(() => {
        timer = null;
        const element = document.querySelector(target);
        if (!element) return;
        if (element.contains(document.activeElement) && document.activeElement.matches("input, textarea, select")) {
          return refresh();
        }
        htmx.ajax("GET", url, { target: target, swap: "innerHTML" });
      }, delay || 500);
    }
    return refresh;
  }

  // The banner that says what is down (runagentd, OpenCode, the database), from /api/health.
  async function fetchHealth() {
    try {
      // banner=true: 200 with the status in the body (a 503 would be a console error each poll)
      const response = await fetch("/api/health?banner=true", { headers: { Accept: "application/json" } });
      return await response.json();
    } catch (error) {
      return null; // the server itself is unreachable
    }
  }
  function showHealth(banner, health) {
    const text = health
      ? [...(health.problems || []), ...(health.warnings || [])].join(" · ")
      : "The server is unreachable: what you see may be out of date.";
    banner.textContent = text;
    banner.hidden = !text;
  }
  async function checkHealth(banner) {
    const health = await fetchHealth();
    showHealth(banner, health);
    return health;
  }

  // A 503 (the database away) met by any part of an open page: its banner says what is down
  // and since when, from /api/health, until the database answers again. Without it a page
  // refreshed by htmx or fed by a socket would only go stale.
  let outageTimer = null;
  function pageBanner() {
    let banner = document.getElementById("health-banner") || document.getElementById("daemon-banner");
    const main = document.getElementById("main");
    if (!banner && main) {
      banner = document.createElement("div");
      banner.className = "banner";
      banner.id = "daemon-banner";
      banner.setAttribute("role", "alert");
      banner.hidden = true;
      main.parentNode.insertBefore(banner, main);
    }
    return banner;
  }
  function watchOutage() {
    const banner = pageBanner();
    if (outageTimer || !banner) return;
    let shown = false;
    const check = async () => {
      const health = await fetchHealth();
      const away = !health || (health.database && health.database.ok === false);
      // A 503 for another reason (a web process draining) leaves the banner as it was.
      if (away || shown) showHealth(banner, health);
      shown = away;
      if (!away) {
        window.clearInterval(outageTimer);
        outageTimer = null;
      }
    };
    outageTimer = window.setInterval(check, 3000);
    check();
  }
  document.addEventListener("htmx:responseError", (event) => {
    if (event.detail.xhr && event.detail.xhr.status === 503) watchOutage();
  });

  function watchHealth(banner, every) {
    checkHealth(banner);
    return window.setInterval(() => checkHealth(banner), every || 15000);
  }

  window.AgentSysLive = { follow, followers, getJSON, RUN_STATUSES, refresher, statusWord, watchHealth, watchOutage };
})();
