// Markdown in chat replies, made safe: marked turns the text into HTML with any raw HTML in it
// escaped (a model's "<b>" shows as typed), then DOMPurify removes whatever could still run.
// One renderer for every reply, those rendered with the page and those streaming in.
(function () {
  "use strict";
  const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
  const escape = (text) => String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
  const parser = new marked.Marked({ gfm: true, breaks: true });
  parser.use({ renderer: { html: ({ text }) => escape(text) } });

  function toHTML(text) {
    const html = parser.parse(String(text || ""), { async: false });
    return DOMPurify.sanitize(html, { FORBID_TAGS: ["style", "form", "input", "img"], FORBID_ATTR: ["style"] });
  }

  function render(element, text) {
    element.innerHTML = toHTML(text);
    element.classList.add("md");
    element.querySelectorAll("a[href]").forEach((a) => { a.target = "_blank"; a.rel = "noopener noreferrer"; });
  }

  window.AgentSysMarkdown = { render, toHTML };
})();
