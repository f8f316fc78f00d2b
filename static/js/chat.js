// One chat: the reply streams into place token by token over the session's WebSocket
// (ws/chat/<id>/), thinking and tool calls collapsed, each l1_action as a card linking the
// agent it created (a research loop's with its progress, polled by htmx). A dropped socket shows in the top bar and resumes after the last event
// seen (live.js), so no text goes missing. Sending and stopping are JSON POSTs.
(function () {
  "use strict";
  const chat = document.getElementById("chat");
  const sessionId = chat.dataset.session;
  const form = document.getElementById("composer");
  const input = document.getElementById("message");
  const sendButton = document.getElementById("send");
  const stopButton = document.getElementById("stop");
  const errorLine = document.getElementById("chat-error");
  // The action tags, as agentsys/chat/actions.py reads them: `key: value` or JSON bodies,
  // attributes, and tags that close themselves; an opening tag with attributes and no
  // closing tag stands alone. They are taken out of the text as it streams.
  const KINDS = "spawn_research|spawn_command|steer_child|stop_child";
  const ATTRS = String.raw`(?:\s+[A-Za-z_][\w.-]*\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'<>\/=\x60]+))*`;
  const LONE_TAG = new RegExp(String.raw`<\s*(?:${KINDS})${ATTRS}\s*\/>`, "gi");
  const ACTION_TAG = new RegExp(String.raw`<\s*(${KINDS})(${ATTRS})\s*>([\s\S]*?)(<\/\s*\1\s*>|$)`, "gi");
  function withoutTags(text) {
    return text.replace(LONE_TAG, "").replace(ACTION_TAG, (whole, kind, attrs, body, close) =>
      close || !attrs.trim() ? "" : body);
  }
  const raw = new Map(); // part id -> text as streamed (tags and all)
  let streaming = chat.dataset.streaming || "";

  function csrf() {
    try {
      return JSON.parse(document.body.getAttribute("hx-headers"))["X-CSRFToken"];
    } catch (error) {
      return "";
    }
  }

  // A POST the network lost (the server away, a connection cut) answers like a refusal,
  // status 0: the caller gives the message back and says so, instead of a dead Send.
  async function post(path, body) {
    let response;
    try {
      response = await fetch(`/chat/${encodeURIComponent(sessionId)}/${path}/`, {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-CSRFToken": csrf() },
        body: JSON.stringify(body || {}),
      });
    } catch (error) {
      return { ok: false, status: 0, body: { detail: "The server did not answer." } };
    }
    let answer = {};
    try { answer = await response.json(); } catch (error) { /* an HTML error page */ }
    return { ok: response.ok, status: response.status, body: answer };
  }

  function nearBottom() {
    return chat.scrollHeight - chat.scrollTop - chat.clientHeight < 120;
  }

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function showError(text) {
    errorLine.hidden = !text;
    errorLine.textContent = text || "";
  }

  function setStreaming(turnId) {
    streaming = turnId || "";
    chat.dataset.streaming = streaming;
    stopButton.hidden = !streaming;
    sendButton.disabled = !!streaming;
    if (streaming) { // at once; the end of the turn reads the session's status from the API
      const pill = document.getElementById("chat-status");
      pill.textContent = AgentSysLive.statusWord("running");
      pill.className = "pill running";
    }
  }

  // -- messages -----------------------------------------------------------------------------
  function message(role, seq, turnId) {
    if (seq && chat.querySelector(`article.msg[data-seq="${seq}"]`)) return null; // replayed
    const empty = document.getElementById("chat-empty");
    if (empty) empty.remove();
    const article = el("article", `msg ${role}`);
    if (seq) article.dataset.seq = seq;
    if (turnId) article.dataset.turn = turnId;
    const who = { user: "You", system: "System", assistant: "Session agent" }[role];
    article.append(el("header", "who", who));
    chat.append(article);
    return article;
  }

  // A child's end reported to the session agent: the person reads one line and a link (the
  // same as sessions_app/_notice.html), not the report the agent was given.
  function showNotice(article, notice) {
    article.classList.add("notice");
    article.textContent = "";
    const line = el("p", "notice-line");
    const link = el("a", "", notice.link);
    link.href = notice.href;
    line.append(el("span", "notice-text", notice.text), " ", link);
    article.append(line);
    if (notice.tools && notice.tools.length) { // the tools the loop called, as tool parts
      const tools = el("div", "notice-tools");
      tools.setAttribute("aria-label", "Tools the loop called");
      for (const call of notice.tools) tools.append(fillTool(el("details", "tool"), call));
      article.append(tools);
    }
  }

  function reply(turnId) {
    let article = chat.querySelector(`article.msg.assistant.streamed[data-turn="${turnId}"]`);
    if (!article) {
      article = message("assistant", null, turnId);
      article.classList.add("streamed");
    }
    return article;
  }

  function textPart(article, id, ptype) {
    let part = article.querySelector(`[data-part="${CSS.escape(id)}"]`);
    if (part) return part;
    if (ptype === "reasoning") {
      part = el("details", "thinking");
      part.append(el("summary", "", "Thinking"), el("div", "text"));
    } else {
      part = el("div", "text");
    }
    part.dataset.part = id;
    article.append(part);
    return part;
  }

  function onDelta(payload) {
    const article = reply(payload.turn_id);
    const part = textPart(article, payload.id, payload.ptype);
    const text = (raw.get(payload.id) || "") + payload.delta;
    raw.set(payload.id, text);
    if (payload.ptype !== "text") {
      (part.querySelector(".text") || part).textContent = text;
      return;
    }
    renderSoon(part, withoutTags(text).replace(/\n{3,}/g, "\n\n"));
  }

  // Markdown is rendered at most every 40 ms per part, however fast the deltas come (a timer,
  // not requestAnimationFrame: a tab in the background still catches up).
  const pending = new Map(); // part element -> its latest text
  function renderSoon(part, text) {
    const first = !pending.has(part);
    pending.set(part, text);
    if (!first) return;
    setTimeout(() => {
      const stick = nearBottom();
      AgentSysMarkdown.render(part, pending.get(part));
      pending.delete(part);
      if (stick) chat.scrollTop = chat.scrollHeight;
    }, 40);
  }

  function onTool(payload) {
    const article = reply(payload.turn_id);
    let part = article.querySelector(`[data-part="${CSS.escape(payload.id)}"]`);
    if (!part) {
      part = el("details", "tool");
      part.dataset.part = payload.id;
      article.append(part);
    }
    fillTool(part, payload);
  }

  // A tool part's summary (name, state, title) and its input and output.
  function fillTool(part, payload) {
    part.textContent = "";
    const summary = el("summary");
    summary.append(el("span", "tool-name", payload.tool || "tool"), " ", el("span", `pill ${payload.status || ""}`, AgentSysLive.statusWord(payload.status) || "?"));
    if (payload.title) summary.append(" ", el("span", "muted", payload.title));
    const io = el("div", "tool-io");
    io.append(el("h4", "", "Input"), el("pre", "", JSON.stringify(payload.input ?? {}, null, 2)));
    if (payload.output) io.append(el("h4", "", "Output"), el("pre", "", String(payload.output)));
    part.append(summary, io);
    return part;
  }

  // The same words the page renders (sessions_app/action_cards.py): what the agent did.
  const ACTION_WORDS = JSON.parse(document.getElementById("action-words")?.textContent || "{}");

  function actionTitle(payload) {
    const name = payload.action || "";
    const fallback = `Unknown action tag <${name}>`;
    const [done, refused] = ACTION_WORDS[name] || [fallback, fallback];
    return payload.error ? refused : done;
  }

  function onAction(payload) {
    const card = el("div", "action-card" + (payload.error ? " refused" : ""));
    const title = el("strong");
    const loop = payload.action === "spawn_research" && payload.agent_id && !payload.error;
    if (payload.agent_id && !payload.error) {
      const id = encodeURIComponent(payload.agent_id);
      const link = el("a", "", actionTitle(payload));
      link.href = loop ? `/research/${id}/` : `/agents/#agent-${id}`;
      title.append(link);
    } else {
      title.textContent = actionTitle(payload);
    }
    card.append(title);
    if (payload.agent_id && !loop) card.append(" ", el("span", "muted small", payload.agent_id));
    if (payload.goal) {
      const goal = el("div", "small");
      goal.append(el("bdi", "", payload.goal));
      card.append(goal);
    }
    if (payload.command) card.append(el("code", "small", payload.command));
    if (loop) {
      // The loop's progress line, which then asks again by itself while the loop runs.
      const progress = el("div", "loop-progress small muted", "Starting…");
      progress.setAttribute("hx-get", `/research/${encodeURIComponent(payload.agent_id)}/progress/`);
      progress.setAttribute("hx-trigger", "load");
      progress.setAttribute("hx-swap", "outerHTML");
      card.append(progress);
    }
    if (payload.error) card.append(el("div", "error small", "Not carried out: " + payload.error));
    if (payload.note) card.append(el("div", "action-note small", "Note: " + payload.note));
    reply(payload.turn_id).append(card);
    if (loop && window.htmx) htmx.process(card);
  }

  function showTitle(title) {
    if (!title) return;
    document.getElementById("chat-title").replaceChildren(el("bdi", "", title));
    document.title = `${title} · Chat · AgentSys`; // the tab follows a rename too
  }

  async function onIdle(payload) {
    setStreaming("");
    const article = chat.querySelector(`article.msg.assistant.streamed[data-turn="${payload.turn_id}"]`);
    if (article && payload.outcome && payload.outcome !== "done") {
      article.append(el("p", "muted small", `Reply ${payload.outcome}.`));
    }
    try {
      const session = await AgentSysLive.getJSON(`/api/sessions/${encodeURIComponent(sessionId)}`);
      showTitle(session.title);
      const pill = document.getElementById("chat-status");
      pill.textContent = AgentSysLive.statusWord(session.status);
      pill.className = "pill " + session.status;
    } catch (error) { /* the title stays as it was */ }
  }

  function onEvent(event) {
    const stick = nearBottom();
    const payload = event.payload || {};
    switch (event.kind) {
      case "user_message":
      case "system_message": {
        const article = message(event.kind === "user_message" ? "user" : "system", payload.seq, payload.turn_id);
        if (article && payload.notice) showNotice(article, payload.notice);
        else if (article) article.append(el("div", "text", payload.content));
        setStreaming(payload.turn_id);
        break;
      }
      case "part_delta": onDelta(payload); break;
      case "part_update": onTool(payload); break;
      case "l1_action": onAction(payload); break;
      case "error": reply(payload.turn_id).append(el("p", "error", payload.message)); break;
      // A model wrote the chat's title (beside its first reply): shown as an idle shows it.
      case "session_title": showTitle(payload.title); break;
      case "session_status":
        if (payload.status === "idle") onIdle(payload);
        else setStreaming(payload.turn_id);
        break;
      default: break;
    }
    if (stick) chat.scrollTop = chat.scrollHeight;
  }

  // -- the composer -------------------------------------------------------------------------
  // The box is emptied as the message leaves: what is typed while it is sent or answered is
  // the next message, and stays. A message that was not sent comes back, before any of that.
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const text = input.value.trim();
    if (!text || streaming) return;
    const mode = form.querySelector("input[name=mode]:checked").value;
    sendButton.disabled = true;
    input.value = "";
    showCut("");
    const answer = await post("send", { message: text, mode });
    if (answer.ok) {
      showError("");
      setStreaming(answer.body.turn_id);
    } else {
      input.value = input.value ? `${text}\n${input.value}` : text;
      sendButton.disabled = false;
      showError(answer.status === 0
        ? "The server did not answer: if your message is not in the chat above, send it again."
        : answer.body.detail || `Not sent (${answer.status}).`);
    }
  });

  // A paste that would go past the limit is cut to fit, and the person is told by how much
  // (the browser's maxlength would cut it without a word).
  const cutNotice = document.getElementById("composer-notice");
  function showCut(text) {
    cutNotice.hidden = !text;
    cutNotice.textContent = text || "";
  }
  function insertCut(text, inputType) {
    const limit = input.maxLength > 0 ? input.maxLength : Infinity;
    const room = limit - (input.value.length - (input.selectionEnd - input.selectionStart));
    if (text.length <= room) return false;
    const kept = text.slice(0, Math.max(0, room));
    input.setRangeText(kept, input.selectionStart, input.selectionEnd, "end");
    input.dispatchEvent(new InputEvent("input", { bubbles: true, inputType }));
    const fmt = (n) => n.toLocaleString("en");
    showCut(`The ${inputType === "insertFromDrop" ? "dropped" : "pasted"} text was cut: ` +
      `${fmt(text.length - kept.length)} of its ${fmt(text.length)} characters were left out, ` +
      `as a message holds at most ${fmt(limit)}.`);
    return true;
  }
  input.addEventListener("paste", (e) => {
    const text = e.clipboardData ? e.clipboardData.getData("text/plain") : "";
    if (text && insertCut(text, "insertFromPaste")) e.preventDefault();
  });
  input.addEventListener("drop", (e) => {
    const text = e.dataTransfer ? e.dataTransfer.getData("text/plain") : "";
    if (text && insertCut(text, "insertFromDrop")) e.preventDefault();
  });
  input.addEventListener("input", () => {
    if (!cutNotice.hidden && input.value.length < input.maxLength) showCut("");
  });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      form.requestSubmit();
    }
  });
  stopButton.addEventListener("click", async () => {
    const answer = await post("stop");
    if (!answer.ok) {
      showError(answer.status === 0 ? "Not stopped: the server did not answer."
        : answer.body.detail || "Could not stop the reply.");
    }
  });
  const help = JSON.parse(document.getElementById("mode-help-data").textContent);
  form.querySelectorAll("input[name=mode]").forEach((radio) =>
    radio.addEventListener("change", () => { document.getElementById("mode-help").textContent = help[radio.value]; })
  );

  async function loadModels() {
    const select = document.getElementById("model");
    try {
      const body = await AgentSysLive.getJSON("/api/models");
      const current = select.dataset.current;
      select.textContent = "";
      const values = body.models.map((m) => [`${m.provider}/${m.model}`, m.name]);
      if (!values.some(([v]) => v === current)) values.unshift([current, current]);
      for (const [value, name] of values) {
        const option = el("option", "", name === value ? value : `${name} (${value})`);
        option.value = value;
        option.selected = value === current;
        select.append(option);
      }
    } catch (error) {
      select.title = "OpenCode is not answering: the model list is unavailable";
    }
    select.addEventListener("change", async () => {
      const answer = await post("model", { model: select.value });
      showError(answer.ok ? "" : answer.body.detail || "The model was not changed.");
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    chat.querySelectorAll("article.msg.assistant .text.md").forEach((part) => AgentSysMarkdown.render(part, part.textContent));
    setStreaming(streaming);
    chat.scrollTop = chat.scrollHeight;
    window.AgentSysChat = AgentSysLive.follow(`/ws/chat/${encodeURIComponent(sessionId)}/`, onEvent, {
      after: chat.dataset.after,
    });
    loadModels();
  });
})();
