"""Prompt templates: SKILL.md files rendered with `{{name}}` placeholders,
shared by the research loop and the chat agent.

- `{{name}}` takes the variable's text (booleans as true/false, None as nothing); a name with
  no value is removed, so a template never shows the model a raw placeholder.
- `{{#if name}}...{{/if}}` keeps its text only when the variable is non-empty (after
  stripping; False, 0 and None count as empty); blocks may nest. A stray `{{#if}}`/`{{/if}}`
  left unmatched is removed like any unknown placeholder.
- Values are inserted once and never expanded again: a goal containing `{{x}}` stays as typed.
"""

from __future__ import annotations

import re

# The template language only: the SKILL.md files are read by agentsys.skills (PromptSkills).

# An innermost block: its body holds no other `{{#if`, so nested blocks resolve inside out.
_BLOCK = re.compile(
    r"\{\{\s*#if\s+(\w+)\s*\}\}((?:(?!\{\{\s*#if\s).)*?)\{\{\s*/if\s*\}\}", re.DOTALL
)
_STRAY_BLOCK_TAG = re.compile(r"\{\{\s*(?:#if\s+\w*|/if)\s*\}\}")
_PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*\}\}")


def _text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _shown(value) -> bool:
    """Whether an `{{#if}}` block on this value is kept: False and 0 hide it like "" does."""
    if value is None or value is False or (isinstance(value, int | float) and value == 0):
        return False
    return bool(_text(value).strip())


def render(template: str, variables: dict) -> str:
    def block(match: re.Match) -> str:
        return match.group(2) if _shown(variables.get(match.group(1))) else ""

    shown, count = template, 1
    while count:  # innermost blocks first; each pass removes at least one block
        shown, count = _BLOCK.subn(block, shown)
    # A hidden block leaves its surrounding blank lines: collapse runs of them (template text
    # only, before values go in, so a value's own blank lines are kept).
    shown = re.sub(r"\n{3,}", "\n\n", _STRAY_BLOCK_TAG.sub("", shown))
    # One pass over the template: text coming from a value is never scanned again.
    return _PLACEHOLDER.sub(lambda m: _text(variables.get(m.group(1))), shown)
