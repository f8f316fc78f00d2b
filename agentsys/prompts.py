"""Prompt templates: SKILL.md files rendered with `{{name}}` placeholders (design doc §3.4),
shared by the research loop and the chat agent.

- `{{name}}` takes the variable's text (booleans as true/false, None as nothing); a name with
  no value is removed, so a template never shows the model a raw placeholder.
- `{{#if name}}...{{/if}}` keeps its text only when the variable is non-empty.
- Values are inserted once and never expanded again: a goal containing `{{x}}` stays as typed.
"""

from __future__ import annotations

import re
from pathlib import Path

_BLOCK = re.compile(r"\{\{#if\s+(\w+)\s*\}\}(.*?)\{\{/if\}\}", re.DOTALL)
_PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*\}\}")
_FRONT_MATTER = re.compile(r"\A---\n.*?\n---\n", re.DOTALL)


class SkillNotFound(FileNotFoundError):
    pass


def _text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def render(template: str, variables: dict) -> str:
    def block(match: re.Match) -> str:
        return match.group(2) if _text(variables.get(match.group(1))).strip() else ""

    shown = _BLOCK.sub(block, template)
    # One pass over the template: text coming from a value is never scanned again.
    return _PLACEHOLDER.sub(lambda m: _text(variables.get(m.group(1))), shown)


class PromptSkills:
    """Templates in `<skills_dir>/<name>/SKILL.md`, re-read when the file changes."""

    def __init__(self, skills_dir: Path):
        self.skills_dir = Path(skills_dir)
        self._cache: dict[str, tuple[float, str]] = {}

    def get(self, name: str) -> str:
        path = self.skills_dir / name / "SKILL.md"
        try:
            mtime = path.stat().st_mtime
        except OSError:
            raise SkillNotFound(f"prompt template {name!r} not found: no file {path}") from None
        cached = self._cache.get(name)
        if cached is None or cached[0] != mtime:
            body = _FRONT_MATTER.sub("", path.read_text(), count=1).lstrip("\n")
            self._cache[name] = cached = (mtime, body)
        return cached[1]

    def render(self, name: str, variables: dict) -> str:
        return render(self.get(name), variables)
