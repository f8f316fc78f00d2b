"""Replies that need someone's attention: a question for the researcher, and prose with none of
the tags the loop acts on. `agentsys.research.reply` reads the tags; this module reads what a
reply without the usual tags is doing, from the parsed reply plus its raw text.

The rules:
- A reply asks the researcher something when it holds a `<question>…</question>` tag, or when
  it has no `<promise>` and no `<experiments>` and its prose ends with a question to the reader.
  Prose is the text outside code (``` fences and `inline code`), quoted lines (`> …`) and tag
  blocks; it ends with a question when one of its last two sentences ends in "?" and that
  sentence either speaks to the reader ("you", "your", "please", "let me know") or asks for a
  decision (it, or its clause after a colon, semicolon, comma or dash, opens with should,
  shall, which, would, could, can, may, do, does, is it or are we). A rhetorical question
  answered in the next sentences is not among the last two.
- A reply is tagless when it has no promise, no experiments, no plan and no tag of the loop's
  (`promise`, `experiments`, `experiment`, `summary`, `plan`, `question`) outside code, and is
  not a question. The next prompt then names the tags expected (TAGLESS_NOTE); a second
  tagless reply in a row pauses the loop and tells the person (TAGLESS_LIMIT).
- A question is kept in the loop's state until an answer comes (a message or a steer to the
  loop); the loop waits for it in `wait_for_answer` between iterations, asking the model
  nothing, so it uses up no iteration. A pause holds the wait as it holds any step; a stop
  ends it at once; a restart finds the question in the saved state and waits again.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import re
import time
from typing import TYPE_CHECKING, Any, Protocol

from agentsys.reply_text import outside_code

if TYPE_CHECKING:
    from agentsys.research.reply import ParsedReply
    from agentsys.research.state import ResearchState

logger = logging.getLogger("agentsys.research")

TAGLESS_LIMIT = 2  # tagless replies in a row that pause the loop
QUESTION_CHARS = 2000  # of a question kept and shown
ANSWER_POLL_SECONDS = 1.0  # how often a waiting loop looks for the answer
TAGLESS_NOTE = (
    "Your last answer had none of the expected tags (no promise, no experiments, no "
    "summary tag), so nothing was run or recorded: end every answer with a summary tag and a "
    "promise tag (CONTINUE, WAITING or DONE), list runs in an experiments tag, and put a "
    "question for the researcher in a question tag."
)
TAGLESS_PAUSE_REASON = (
    "Paused: the model's last {n} replies had none of the expected tags (promise, "
    "experiments, summary), so the loop could not act on them. Check the model and its "
    "replies in the iteration log; Resume goes on (the next prompt names the tags again)."
)


class Loop(Protocol):
    """What this module uses of the research loop's agent (agentsys.agents.research), named
    here so that the loop's parts never import the agent that drives them."""

    id: str
    state: ResearchState
    _steer_buffer: list[str]

    def emit_event(self, kind: str, payload: dict | None = None) -> None: ...

    def _log_control(self, title: str, text: str = "") -> None: ...

    def _save(self) -> None: ...

    async def alert(
        self, severity: str, message: str, signature: str, data: dict | None = None
    ) -> Any: ...

    async def pause(self) -> None: ...

    async def check_pause(self) -> None: ...

    async def in_memory(self, method: str, /, **kwargs: Any) -> Any: ...


_LOOP_TAG = re.compile(
    r"<\s*/?\s*(promise|experiments?|summary|plan|question)\b[^<>]{0,500}>", re.IGNORECASE
)
# Attributes are bounded: an unclosed `<a ` repeated must not make each `<` scan to the end.
_OPEN_TAG = re.compile(r"<\s*(\w+)[^<>]{0,500}>")
_CLOSE_TAG = re.compile(r"<\s*/\s*(\w+)\s*>")
_ANY_TAG = re.compile(r"</?\s*\w+[^<>]{0,500}>")
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
_TO_THE_READER = re.compile(r"\b(you|your|please|let me know)\b", re.IGNORECASE)
_DECISION = re.compile(
    r"(?:^|[:;,\u2014-])\W*(should|shall|which|would|could|can|may|do|does|is it|are we)\b",
    re.IGNORECASE,
)


def _prose(text: str) -> str:
    """What the model says, not what it quotes: the text outside code and reasoning
    (agentsys.reply_text, the rule every reply reader uses), without quoted lines."""
    return "\n".join(
        line for line in outside_code(text).splitlines() if not line.lstrip().startswith(">")
    )


def question_in(parsed: ParsedReply, text: str) -> str:
    """The question the reply asks the researcher, or "" (the module docstring's rule)."""
    text = text if isinstance(text, str) else ""
    if parsed.question:
        return parsed.question[:QUESTION_CHARS]
    prose = _prose(text)
    if parsed.promise is not None or parsed.experiments:
        return ""
    bare = _ANY_TAG.sub(" ", _without_blocks(prose))
    sentences = [s.strip() for s in _SENTENCE.findall(bare) if s.strip()]
    asked = [s for s in sentences[-2:] if s.endswith("?") and _asks(s)]
    if not asked:
        return ""
    paragraph = _paragraph_of(bare, asked[-1])
    return paragraph[:QUESTION_CHARS]


def _without_blocks(text: str) -> str:
    """The text with each `<name …>…</name>` block replaced by a line break, in one pass:
    every closing tag is found once, and each opening tag looks up its next one (a reply of
    thousands of unclosed tags must not take minutes)."""
    closes: dict[str, list[tuple[int, int]]] = {}
    for close in _CLOSE_TAG.finditer(text):
        closes.setdefault(close.group(1).lower(), []).append((close.start(), close.end()))
    kept, position = [], 0
    for opening in _OPEN_TAG.finditer(text):
        if opening.start() < position:  # inside a block already taken out
            continue
        ends = closes.get(opening.group(1).lower(), [])
        after = bisect.bisect_left(ends, (opening.end(), 0))
        if after < len(ends):
            kept += [text[position : opening.start()], "\n"]
            position = ends[after][1]
    return "".join([*kept, text[position:]])


def _asks(sentence: str) -> bool:
    return bool(_TO_THE_READER.search(sentence) or _DECISION.search(sentence))


def _paragraph_of(text: str, sentence: str) -> str:
    """The paragraph holding `sentence`, its lines joined: the question with its context."""
    for paragraph in reversed(re.split(r"\n\s*\n", text)):
        if sentence in " ".join(paragraph.split()) or sentence in paragraph:
            return " ".join(paragraph.split())
    return sentence


def is_tagless(parsed: ParsedReply, text: str) -> bool:
    """No tag the loop acts on, outside code (the module docstring's rule; a question is
    tested first by the caller)."""
    if parsed.promise is not None or parsed.experiments or parsed.plan:
        return False
    return not _LOOP_TAG.search(_prose(text if isinstance(text, str) else ""))


def review(state: ResearchState, parsed: ParsedReply, text: str, iteration: int) -> str:
    """After an iteration's reply: keep its question in the state, or count a tagless reply
    and add the note for the next prompt to `parsed.problems`. Returns "question",
    "tagless" or ""."""
    question = question_in(parsed, text)
    if question:
        state.tagless_streak = 0
        state.question = {"text": question, "iteration": iteration, "asked_at": time.time()}
        return "question"
    if is_tagless(parsed, text):
        state.tagless_streak += 1
        parsed.problems.append(TAGLESS_NOTE)
        return "tagless"
    state.tagless_streak = 0
    return ""


async def follow_up(agent: Loop, found: str) -> None:
    """Tell the person: a question (alert + event; the loop then waits for the answer at the
    start of its next iteration), or a second tagless reply in a row (alert + event, and the
    loop pauses itself until Resume)."""
    state = agent.state
    if found == "question" and state.question:
        text = state.question["text"]
        if state.phase != "iterating":  # its last iteration, or DONE: nothing left to wait for
            state.question = {}  # but never dropped unseen: the page's timeline and log say it
            unwaited = f"{text} (asked in its last step: the loop did not wait for an answer)"
            agent.emit_event("question", {"question": unwaited, "waited": False})
            agent._log_control("Question for the researcher", unwaited)
            return
        agent.emit_event("question", {"question": text, "iteration": state.question["iteration"]})
        agent._log_control("Question for the researcher (the loop waits for the answer)", text)
        asked_in = state.question["iteration"]  # research_app.questions reads it back
        await _alert(agent, f"The research loop asks: {text}", f"question:{asked_in}")
    elif found == "tagless" and state.tagless_streak >= TAGLESS_LIMIT:
        reason = TAGLESS_PAUSE_REASON.format(n=state.tagless_streak)
        state.tagless_streak = 0
        agent.emit_event("needs_attention", {"reason": reason})
        agent._log_control("Paused: replies without tags", reason)
        await _alert(agent, f"The research loop paused: {reason}", "tagless")
        await agent.pause()


async def _alert(agent: Loop, message: str, signature: str) -> None:
    try:
        await agent.alert("warning", message, signature, {"loop": agent.id})
    except Exception:  # the event and the loop page still say it
        logger.exception("%s: could not raise the alert", agent.id)


async def wait_for_answer(agent: Loop) -> None:
    """While the loop's question is open, wait (pause-aware, stop-cancellable) until a message
    or a steer reaches the loop; it is read as the next iteration's guidance."""
    state = agent.state
    if not state.question:
        return
    while not await _answer_came(agent):
        await agent.check_pause()
        await asyncio.sleep(ANSWER_POLL_SECONDS)
    agent.emit_event("answered", {"question": state.question.get("text", "")})
    state.question = {}
    agent._save()


async def _answer_came(agent: Loop) -> bool:
    if agent._steer_buffer:  # a PRIORITY steer: read by the next iteration too
        return True
    try:
        return bool(await agent.in_memory("read_inbox"))  # peeked: the iteration acks it
    except Exception:  # the database away: keep waiting
        logger.exception("%s: could not look for the answer", agent.id)
        return False
