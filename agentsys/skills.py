"""The skills folder as data: list the prompt templates, read one, check an edit, save it.

Each skill is `<skills_dir>/<id>/SKILL.md`: front matter between `---` lines (`name:`,
`description:`, and `variables:`, a comma-separated list of the placeholders its template may
use, which the code that renders it supplies), then the template (agentsys.prompts renders
it). Plain Python, no Django: the API and the tests call it with a folder. The one reader of
these files: the agents read their templates through PromptSkills, which keeps each parsed.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from agentsys.prompts import render

SKILL_ID = re.compile(r"^[a-z0-9_]{1,64}$")
MAX_TEMPLATE_BYTES = 200 * 1024
# Every `{{...}}` tag, then what each kind looks like (agentsys.prompts's syntax).
_FRONT_MATTER = re.compile(r"\A\ufeff?---[ \t]*\n.*?\n---[ \t]*(?:\n|\Z)", re.DOTALL)
_TAG = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_PLACEHOLDER = re.compile(r"^\s*(\w+)\s*$")
_IF = re.compile(r"^\s*#if\s+(\w+)\s*$")
_END_IF = re.compile(r"^\s*/if\s*$")


class SkillNotFound(FileNotFoundError, LookupError):
    """No such skill, or its file cannot be read. Both kinds, so that callers catching a
    missing file (OSError) and those catching a missing key (LookupError) see it."""


class InvalidSkill(ValueError):
    """The template has problems; `problems` lists them, one readable line each."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Skill:
    id: str
    name: str
    description: str
    variables: list[str] | None  # None: the front matter declares none (no name check)
    template: str = field(default="", repr=False)


def _split(text: str) -> tuple[str, str]:
    """(front matter block or "", template body) of a SKILL.md text."""
    text = text.replace("\r\n", "\n")
    match = _FRONT_MATTER.match(text)
    if not match:
        return "", text
    return match.group(0), text[match.end() :].lstrip("\n")


def _fields(front_matter: str) -> dict[str, str]:
    fields = {}
    for line in front_matter.splitlines()[1:-1]:
        key, sep, value = line.partition(":")
        if sep and key.strip():
            fields[key.strip().lower()] = value.strip()
    return fields


def _variables(fields: dict[str, str]) -> list[str] | None:
    if "variables" not in fields:
        return None
    return [name.strip() for name in fields["variables"].split(",") if name.strip()]


def _path(skills_dir: Path, skill_id: str) -> Path:
    if not isinstance(skill_id, str) or not SKILL_ID.match(skill_id):
        raise SkillNotFound(f"No skill {skill_id!r} (ids are 1-64 of a-z, 0-9, _)")
    path = Path(skills_dir) / skill_id / "SKILL.md"
    if not path.is_file():
        raise SkillNotFound(f"No skill {skill_id!r}")
    return path


def _parse(skill_id: str, text: str) -> Skill:
    front_matter, body = _split(text)
    fields = _fields(front_matter)
    return Skill(
        id=skill_id,
        name=fields.get("name", skill_id),
        description=fields.get("description", ""),
        variables=_variables(fields),
        template=body,
    )


def list_skills(skills_dir: Path) -> list[Skill]:
    """Every `<id>/SKILL.md` with a valid id, by id (templates not included)."""
    skills = []
    root = Path(skills_dir)
    if not root.is_dir():
        return skills
    for entry in sorted(root.iterdir()):
        if SKILL_ID.match(entry.name) and (entry / "SKILL.md").is_file():
            skill = read(skills_dir, entry.name)
            skills.append(
                Skill(skill.id, skill.name, skill.description, skill.variables, template="")
            )
    return skills


def read(skills_dir: Path, skill_id: str) -> Skill:
    path = _path(skills_dir, skill_id)
    return _parse(skill_id, path.read_text(encoding="utf-8", errors="replace"))


def problems_in(text: str, variables: list[str] | None) -> list[str]:
    """What is wrong with a template: empty, too big, unbalanced `{{#if}}`/`{{/if}}`, a tag
    that is not a placeholder, or a name outside `variables` (when they are declared)."""
    problems = []
    if not text.strip():
        return ["the template is empty"]
    size = len(text.encode("utf-8"))
    if size > MAX_TEMPLATE_BYTES:
        problems.append(f"the template is {size} bytes, over the {MAX_TEMPLATE_BYTES} allowed")
    allowed = set(variables) if variables is not None else None
    unknown: list[str] = []
    depth = 0
    for match in _TAG.finditer(text):
        inner = match.group(1)
        line = text.count("\n", 0, match.start()) + 1
        if _END_IF.match(inner):
            if depth == 0:
                problems.append(f"line {line}: {{{{/if}}}} closes no {{{{#if}}}}")
            else:
                depth -= 1
            continue
        name_match = _IF.match(inner) or _PLACEHOLDER.match(inner)
        if name_match is None:
            problems.append(f"line {line}: {match.group(0)!r} is not a placeholder")
            continue
        if _IF.match(inner):
            depth += 1
        name = name_match.group(1)
        if allowed is not None and name not in allowed and name not in unknown:
            unknown.append(name)
    if depth:
        problems.append(f"{depth} {{{{#if}}}} block(s) not closed by {{{{/if}}}}")
    if unknown:
        known = ", ".join(sorted(allowed)) or "none"
        problems.append(
            f"unknown variable(s): {', '.join(unknown)} (this skill's variables: {known})"
        )
    return problems


def validate(skills_dir: Path, skill_id: str, text: str) -> list[str]:
    """Problems of `text` as the new SKILL.md (or template) of an existing skill. Its names
    are checked against the variables the skill's current file declares: they are what the
    code supplies, so an edit cannot widen them."""
    current = read(skills_dir, skill_id)
    front_matter, body = _split(text)
    problems = problems_in(body, current.variables)
    if front_matter:
        declared = _variables(_fields(front_matter))
        if current.variables is not None and declared != current.variables:
            problems.append(
                "the front matter's variables line must stay "
                f"'variables: {', '.join(current.variables)}' (the code supplies them)"
            )
    return problems


def write(skills_dir: Path, skill_id: str, text: str) -> Skill:
    """Save a checked edit atomically (a temporary file, then os.replace): readers see the old
    file or the new one, never half. A text with no front matter keeps the current one.
    Raises SkillNotFound or InvalidSkill."""
    path = _path(skills_dir, skill_id)
    problems = validate(skills_dir, skill_id, text)
    if problems:
        raise InvalidSkill(problems)
    text = text.replace("\r\n", "\n")
    if not _FRONT_MATTER.match(text):
        current_front, _ = _split(path.read_text(encoding="utf-8", errors="replace"))
        text = current_front + text.lstrip("\n")
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=".SKILL.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return _parse(skill_id, text)


class PromptSkills:
    """Templates in `<skills_dir>/<name>/SKILL.md` for the agents: the template of each (its
    front matter left out), re-read when the file changes."""

    def __init__(self, skills_dir: Path):
        self.skills_dir = Path(skills_dir)
        self._cache: dict[str, tuple[tuple[int, int], str]] = {}

    def get(self, name: str) -> str:
        path = self.skills_dir / name / "SKILL.md"
        try:
            info = path.stat()
        except OSError:
            raise SkillNotFound(f"prompt template {name!r} not found: no file {path}") from None
        # Size too: an edit within the filesystem's timestamp resolution still shows.
        version = (info.st_mtime_ns, info.st_size)
        cached = self._cache.get(name)
        if cached is None or cached[0] != version:
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError as error:
                raise SkillNotFound(
                    f"prompt template {name!r}: cannot read {path}: {error}"
                ) from None
            body = _parse(name, text).template.lstrip("\n")
            self._cache[name] = cached = (version, body)
        return cached[1]

    def render(self, name: str, variables: dict) -> str:
        return render(self.get(name), variables)
