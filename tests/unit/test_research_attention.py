"""Which replies ask the researcher something, and which carry none of the loop's tags
(agentsys.research.attention): the rules its docstring states, case by case."""

from __future__ import annotations

import time

import pytest

from agentsys.research.attention import TAGLESS_NOTE, follow_up, is_tagless, question_in, review
from agentsys.research.reply import parse_reply
from agentsys.research.state import ResearchState


def asked(text: str) -> str:
    return question_in(parse_reply(text), text)


@pytest.mark.parametrize(
    "text",
    [
        "I can run the sweep either way. Should the runs use GPU or CPU?",
        "The data loader is slow.\n\nDo you want me to cache the dataset on disk first?",
        "Two options: a bigger batch or a smaller lr. Which one would you prefer? Thanks.",
        "<summary>Waiting on a decision.</summary>\n<question>GPU or CPU?</question>",
        # a question tag counts even next to a promise and experiments
        "<question>May I delete old checkpoints?</question>\n<promise>CONTINUE</promise>",
    ],
)
def test_a_reply_that_asks_the_researcher_is_a_question(text):
    assert asked(text)


def test_the_question_tag_is_what_the_person_reads():
    text = "Some notes first.\n<question>\n  Use the CPU or the GPU?\n</question>"
    assert asked(text) == "Use the CPU or the GPU?"


def test_a_prose_question_comes_with_its_paragraph():
    text = "Iteration went fine.\n\nThe GPU is busy with another run. Should I use the CPU?"
    assert asked(text) == "The GPU is busy with another run. Should I use the CPU?"


@pytest.mark.parametrize(
    "text",
    [
        # a rhetorical question, answered in the next sentences
        "Why did the loss diverge? The learning rate was too high. I lowered it. Done now.",
        # a question with a promise or experiments is the model's own business
        "Should the runs use GPU or CPU? I will use the CPU.\n<promise>CONTINUE</promise>",
        # questions inside code or quoted are not asked
        "Here is the prompt I used:\n```\nShould you stop?\n```\nAll good.",
        "> Should the runs use GPU or CPU?\nThe researcher asked that before; CPU it is.",
        "Plain statement: the loss went down to 0.12.",
        # a question mark in a statement that asks no one
        "What went wrong? Nothing.",
    ],
)
def test_a_reply_that_asks_no_one_is_no_question(text):
    assert asked(text) == ""


@pytest.mark.parametrize(
    ("text", "tagless"),
    [
        ("I looked at the code and it trains fine. Next I will try a larger lr.", True),
        ("Mentioned in code only: `<summary>` is how I would start.", True),
        ("<summary>Read the code.</summary>", False),
        ("Going on.\n<promise>CONTINUE</promise>", False),
        ('<promise value="DONE"/>', False),
    ],
)
def test_tagless_means_no_tag_of_the_loop_outside_code(text, tagless):
    assert is_tagless(parse_reply(text), text) is tagless


def test_review_counts_tagless_replies_and_notes_what_was_missing():
    state = ResearchState(goal="g")
    text = "I had a look around the project."
    parsed = parse_reply(text)
    assert review(state, parsed, text, 1) == "tagless"
    assert state.tagless_streak == 1
    assert parsed.problems.count(TAGLESS_NOTE) == 1
    again = parse_reply(text)
    review(state, again, text, 2)
    assert state.tagless_streak == 2
    tagged = "<summary>ok</summary><promise>CONTINUE</promise>"
    assert review(state, parse_reply(tagged), tagged, 3) == ""
    assert state.tagless_streak == 0


def test_review_keeps_the_question_in_the_state():
    state = ResearchState(goal="g", tagless_streak=1)
    text = "Before I spend GPU hours: should the runs use GPU or CPU?"
    assert review(state, parse_reply(text), text, 4) == "question"
    assert state.question["text"] == text and state.question["iteration"] == 4
    assert state.tagless_streak == 0
    assert ResearchState.from_dict(state.as_dict()).question == state.question  # saved


@pytest.mark.parametrize(
    "hostile", ["<a>" * 70_000, "<a " * 70_000, "<question>x" * 40_000, "<b>x? " * 40_000]
)
def test_a_hostile_reply_is_read_for_a_question_quickly(hostile):
    """Each of these took minutes when every opening tag scanned to the end of the reply."""
    started = time.monotonic()
    parsed = parse_reply(hostile)
    question_in(parsed, hostile)
    is_tagless(parsed, hostile)
    assert time.monotonic() - started < 5


def test_a_question_tag_is_read_as_the_reply_reader_reads_tags():
    quoted = "Ask with `<question>GPU or CPU?</question>`.\n<promise>CONTINUE</promise>"
    assert question_in(parse_reply(quoted), quoted) == ""
    meant = "<summary>Read train.py.</summary>\n< question >Should I use the GPU?</ question >"
    assert question_in(parse_reply(meant), meant) == "Should I use the GPU?"


class _Agent:
    """What follow_up uses of a research agent, recording what it told the person."""

    def __init__(self, state):
        self.state, self.events, self.log, self.alerts = state, [], [], []

    def emit_event(self, kind, payload):
        self.events.append((kind, payload))

    def _log_control(self, title, text=""):
        self.log.append((title, text))

    async def alert(self, *args):
        self.alerts.append(args)


async def test_a_question_in_the_last_step_is_said_not_dropped():
    """Asked as the loop goes on to reflect: nothing is left to wait in, but the person still
    reads the question in the loop's timeline and log, saying it was not waited for."""
    state = ResearchState(goal="g", phase="reflecting")
    state.question = {"text": "Should I try lr=1?", "iteration": 3, "asked_at": 0.0}
    agent = _Agent(state)
    await follow_up(agent, "question")
    assert state.question == {}
    ((kind, payload),) = agent.events
    assert kind == "question" and payload["waited"] is False
    assert "Should I try lr=1?" in payload["question"] and "did not wait" in payload["question"]
    assert "Should I try lr=1?" in agent.log[0][1]
