"""Reading the model's reply: its tags, each from its LAST occurrence, since the stream may
echo the prompt (and the examples in it) before the real answer.

- Every prompt template ends with `END_MARKER`; when the reply contains it, only the text after
  its last occurrence is read, so an echoed prompt's example tags can never count.
- Only tags in the answer's own text count: a tag in inline code or in a code block is quoted
  ("I will answer with `<promise>DONE</promise>`"), as is one in a `<think>` part. A whole
  answer in one fence, or in a ```markdown / ```xml fence, is read. The rules are
  agentsys.reply_text's; a tag found only in code gets a note saying it was not used.
- Tags are matched loosely: any case, spaces inside (`< promise >`), attributes on the
  opening tag. A tag opened and never closed gets a note, except a later prose mention of a
  tag whose block came before it ("the <experiments> above": the tag followed by a space or
  punctuation and more words on its line).
- `<promise>` is a promise only when its first word is DONE, CONTINUE or WAITING (any case,
  emphasis and punctuation dropped: `Done!`, `**DONE** — lr=0.05 is best`); the words after
  it are kept as `promise_reason`. `<promise value="DONE"/>` (any attribute) counts too.
  Anything else is not a promise: the note says what was expected.
- `<continue>` is True only for yes/true/1.
- `<experiments>` (or `<experiment>`) entries are read by agentsys.research.entries.

Nothing in a reply can make the loop crash: a malformed part is left out and described in
`problems`, which the next prompt shows the model so it can do better.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from agentsys.reply_text import outside_code, without_reasoning
from agentsys.research.entries import ExperimentSpec, parse_experiments

__all__ = ["END_MARKER", "ExperimentSpec", "ParsedReply", "parse_experiments", "parse_reply"]

SUMMARY_FALLBACK_CHARS = 300
TRUE_WORDS = {"yes", "true", "1"}
END_MARKER = "<!-- agentsys-prompt-end -->"
TAGS = (
    "promise",
    "plan",
    "summary",
    "experiments",
    "experiment",
    "reflection",
    "memories",
    "question",
)
PROMISES = ("DONE", "CONTINUE", "WAITING")
_NOTED_IN_CODE = (
    "promise",
    "experiments",
    "experiment",
    "plan",
    "summary",
    "reflection",
    "question",
)


@dataclass
class ParsedReply:
    promise: str | None = None
    promise_reason: str = ""
    plan: str | None = None
    summary: str = ""
    experiments: list[ExperimentSpec] = field(default_factory=list)
    reflection: str | None = None
    continue_loop: bool | None = None
    memories: list[tuple[str, str]] = field(default_factory=list)
    question: str | None = None  # for the researcher: agentsys.research.attention
    problems: list[str] = field(default_factory=list)

    def cap_experiments(self, limit: int) -> None:
        """Keep the first `limit` experiments; the note says how many were refused."""
        if len(self.experiments) <= limit:
            return
        refused = len(self.experiments) - limit
        self.problems.append(
            f"{refused} of your {len(self.experiments)} experiments were refused and not run: "
            f"at most {limit} run per iteration (max_experiments_per_iteration); the first "
            f"{limit} ran. Propose the others in a later iteration if they are still needed"
        )
        self.experiments = self.experiments[:limit]


def _opening(name: str) -> re.Pattern:
    return re.compile(rf"<\s*{name}(?=[\s>])[^<>]*?(?<!/)>", re.IGNORECASE)


def _closing(name: str) -> re.Pattern:
    return re.compile(rf"<\s*/\s*{name}\s*>", re.IGNORECASE)


def _block_span(plain: str, name: str) -> tuple[int, int, int] | None:
    """(opening tag start, content start, content end) of the last complete block in
    `plain`. The opening tag is the last one before the last closing tag, so a tag merely
    mentioned earlier in prose ("answer in a <plan> tag") does not swallow the text up to
    the block."""
    closes = list(_closing(name).finditer(plain))
    if not closes:
        return None
    opens = list(_opening(name).finditer(plain, 0, closes[-1].start()))
    if not opens:
        return None
    return opens[-1].start(), opens[-1].end(), closes[-1].start()


def last_tag(text: str, name: str, plain: str | None = None) -> str | None:
    """The content of the last complete `<name>...</name>` outside code, stripped; None when
    absent. `plain` is `outside_code(text)` when the caller has it already."""
    span = _block_span(outside_code(text) if plain is None else plain, name)
    return None if span is None else text[span[1] : span[2]].strip()


def _unclosed(plain: str, name: str) -> bool:
    """The reply's last `<name>` has no `</name>` after it (a cut-off or forgotten tag), and
    is not a prose mention after a complete block."""
    opens = list(_opening(name).finditer(plain))
    closes = list(_closing(name).finditer(plain))
    if not opens or (closes and opens[-1].start() < closes[-1].start()):
        return False
    if closes:  # a complete block came first: a mention in a sentence is not a block
        after = plain[opens[-1].end() :].split("\n", 1)[0]
        if re.match(r"[ \t]+\S|[.,;:)]", after):
            return False
    return True


def parse_reply(text: str) -> ParsedReply:
    text = text if isinstance(text, str) else ""
    end = text.rfind(END_MARKER)
    if end >= 0 and text[end + len(END_MARKER) :].strip():  # an echo, then the real answer
        text = text[end + len(END_MARKER) :]
    plain = outside_code(text)
    reply = ParsedReply()
    for name in TAGS:
        if _unclosed(plain, name):
            reply.problems.append(
                f"<{name}> was opened but never closed with </{name}>; that part was ignored"
            )
    quoted = [
        name
        for name in _NOTED_IN_CODE
        if _block_span(plain, name) is None
        and _block_span(text, name) is not None
        and not (name == "promise" and _self_closed_promise(plain))
    ]
    if quoted:
        tags = ", ".join(f"<{name}>" for name in quoted)
        reply.problems.append(
            f"{tags} appeared only inside code (backticks or a ``` block), which quotes a tag "
            "rather than using it, so it was not used; write tags as plain text"
        )
    _read_promise(reply, text, plain)
    reply.plan = last_tag(text, "plan", plain) or None
    reply.reflection = last_tag(text, "reflection", plain) or None
    reply.question = last_tag(text, "question", plain) or None
    summary = last_tag(text, "summary", plain)
    reply.summary = summary if summary else _fallback_summary(without_reasoning(text))
    cont = last_tag(text, "continue", plain)
    reply.continue_loop = None if cont is None else cont.strip().lower() in TRUE_WORDS
    memories = last_tag(text, "memories", plain)
    reply.memories = parse_memories(memories) if memories else []
    block = last_tag(text, "experiments", plain)
    if block is None:
        block = last_tag(text, "experiment", plain)
    if block:
        reply.experiments, problems = parse_experiments(block)
        reply.problems.extend(problems)
    return reply


_SELF_CLOSED_PROMISE = re.compile(
    r"<\s*promise\b[^<>]*?=\s*[\"']?\s*([^\"'\s/>]+)[^<>]*/\s*>", re.IGNORECASE
)


def _self_closed_promise(plain: str) -> re.Match | None:
    """The last `<promise value="DONE"/>` (any attribute name)."""
    found = list(_SELF_CLOSED_PROMISE.finditer(plain))
    return found[-1] if found else None


def _read_promise(reply: ParsedReply, text: str, plain: str) -> None:
    span, tag = _block_span(plain, "promise"), _self_closed_promise(plain)
    if tag is not None and (span is None or tag.start() > span[0]):
        raw = tag.group(1)
    elif span is not None:
        raw = text[span[1] : span[2]]
        if not raw.strip():  # `<promise value="DONE"></promise>`
            attribute = re.search(r"=\s*[\"']?\s*(\w+)", plain[span[0] : span[1]])
            raw = attribute.group(1) if attribute else ""
    else:
        return
    words = re.sub(r"[*_`'\"]", " ", raw).split()
    first = re.sub(r"[^A-Za-z]", "", words[0]).upper() if words else ""
    if first in PROMISES:
        reply.promise = first
        reason = " ".join(words[1:]).lstrip("\u2014\u2013-:,. ")  # dashes: "DONE — why"
        reply.promise_reason = " ".join(reason.split())[:300]
    elif words:
        reply.problems.append(
            f"<promise> held {' '.join(words)[:60]!r}, which is not a promise: it must start "
            "with DONE, CONTINUE or WAITING; it was ignored"
        )


def _fallback_summary(text: str) -> str:
    """The first characters of the text without its tag blocks and tag marks. Linear: a reply
    of thousands of unclosed tags must not take minutes. A question stays: a reply that only
    asks is summed up by what it asks."""
    for name in (*(tag for tag in TAGS if tag != "question"), "continue"):
        kept, pos = [], 0
        opening, closing = _opening(name), _closing(name)
        while (start := opening.search(text, pos)) and (end := closing.search(text, start.end())):
            kept.append(text[pos : start.start()])
            pos = end.end()
        text = "".join(kept) + text[pos:]
    bare = re.sub(r"<\s*/?\s*\w+[^<>]*>", "", text)
    return _cut(" ".join(bare.split()), SUMMARY_FALLBACK_CHARS)


def _cut(text: str, limit: int) -> str:
    """At most `limit` characters, ending at a word, before any bracket it would leave open,
    with "…" where text was left out: a summary cut at "(run", as a loop's page showed one,
    read as if the page was broken."""
    if len(text) <= limit:
        return text
    kept = text[: limit - 1]
    if (space := kept.rfind(" ")) > limit // 2:
        kept = kept[:space]
    if kept.count("(") > kept.count(")") and (bracket := kept.rfind("(")) > limit // 2:
        kept = kept[:bracket]
    return kept.rstrip(" ,;:([{-") + "…"


def parse_memories(block: str) -> list[tuple[str, str]]:
    """`- [tag] text` lines (also `*` and `1.` lists; tag lower-cased, `general` when absent);
    blank lines and lines that are not list items are ignored."""
    memories = []
    for line in block.splitlines():
        item = re.match(r"\s*(?:[-*]|\d+[.)])\s+(.*)", line)
        if not item:
            continue
        match = re.match(r"\[([^\]]*)\]\s*(.*)", item.group(1))
        tag, body = (match.group(1).strip().lower(), match.group(2)) if match else ("", item[1])
        if body.strip():
            memories.append((tag or "general", body.strip()))
    return memories
