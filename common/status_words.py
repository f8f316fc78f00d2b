"""The words a person reads for a status value: one mapping for every page, pill and script.

Status values are identifiers (`awaiting_human`); pages show words (`awaiting you`). The
templates use the `status_word` filter, the scripts `AgentSysLive.statusWord` over the same
table (rendered once into base.html), so a page updated live reads as it did when rendered.
"""

from __future__ import annotations

# Only the values whose identifier is not already the word; any other value is shown with
# its underscores as spaces.
STATUS_WORDS = {
    "awaiting_human": "awaiting you",
    "awaiting_reply": "awaiting your answer",
    "awaiting_approval": "awaiting your approval (budget)",
    "questionable": "ended unclear",
}


# A research step's promise (agentsys.research.reply, agentsys.agents.research): the model's
# or the loop's word, upper case; a person reads what it means.
PROMISE_WORDS = {
    "DONE": "Done: the goal is met",
    "WAITING": "Waiting for results",
    "CONTINUE": "Going on",
    "REFLECT_CONTINUE": "Going on after reflection",
    "REFLECT_STOP": "Stopped after reflection",
}


def promise_word(value: object) -> str:
    """A promise the table does not know is still the model's own word, made readable."""
    text = "" if value is None else str(value)
    return PROMISE_WORDS.get(text.upper(), text.replace("_", " ").capitalize())


def status_word(value: object) -> str:
    text = "" if value is None else str(value)
    return STATUS_WORDS.get(text, text.replace("_", " "))
