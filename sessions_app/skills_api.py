"""REST for the prompt templates (skills/<id>/SKILL.md): list them, read one, edit one.
An edit is checked first (agentsys.skills.validate) and answered 422 with every problem."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from ninja import Router, Schema, Status
from pydantic import ConfigDict

from agentsys import skills
from agentsys.research.settings import DEFAULT_SKILLS_DIR

router = Router()


def skills_dir() -> Path:
    """The repository's skills/ folder; settings.AGENTSYS_SKILLS_DIR overrides it (tests)."""
    return Path(getattr(settings, "AGENTSYS_SKILLS_DIR", None) or DEFAULT_SKILLS_DIR)


class SkillOut(Schema):
    id: str
    name: str
    description: str
    variables: list[str] | None


class SkillDetailOut(SkillOut):
    template: str


class SkillIn(Schema):
    model_config = ConfigDict(extra="forbid")

    template: str


class ErrorOut(Schema):
    detail: str


class ProblemsOut(Schema):
    detail: str
    problems: list[str] = []


def _out(skill: skills.Skill) -> dict:
    return {
        "id": skill.id,
        "name": skill.name,
        "description": skill.description,
        "variables": skill.variables,
        "template": skill.template,
    }


@router.get("/skills", response=list[SkillOut], summary="The prompt templates")
def list_skills(request):
    return [_out(skill) for skill in skills.list_skills(skills_dir())]


@router.get(
    "/skills/{skill_id}",
    response={200: SkillDetailOut, 404: ErrorOut},
    summary="One prompt template, with its text (front matter left out)",
)
def get_skill(request, skill_id: str):
    try:
        return _out(skills.read(skills_dir(), skill_id))
    except skills.SkillNotFound as error:
        return Status(404, {"detail": str(error)})


@router.put(
    "/skills/{skill_id}",
    response={200: SkillDetailOut, 404: ErrorOut, 422: ProblemsOut},
    summary="Replace a prompt template",
    description="`template` is the new text; with no front matter the current one is kept. "
    "422 lists every problem: an unknown variable, an unbalanced `{{#if}}`/`{{/if}}`, an "
    "empty or over-200-KB text. The agents read the new text at their next prompt.",
)
def put_skill(request, skill_id: str, payload: SkillIn):
    try:
        return _out(skills.write(skills_dir(), skill_id, payload.template))
    except skills.SkillNotFound as error:
        return Status(404, {"detail": str(error)})
    except skills.InvalidSkill as error:
        return Status(422, {"detail": str(error), "problems": error.problems})
