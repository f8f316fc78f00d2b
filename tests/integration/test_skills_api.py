"""The prompt templates over REST (issue 11 item 8): list, read, edit with validation; an
edit is what the next prompt renders."""

from __future__ import annotations

import pytest

from agentsys.skills import PromptSkills

pytestmark = pytest.mark.django_db

L1_VARIABLES = {
    "workdir",
    "mode",
    "children_status",
    "experiment_context",
    "memories",
    "conversation_history",
    "system_prompt",
}


def test_the_list_has_the_research_and_chat_skills_with_their_variables(api):
    skills = {s["id"]: s for s in api("get", "/api/skills").json()}
    assert {"wild_v2_planning", "wild_v2_iteration", "wild_v2_reflection"} <= set(skills)
    for mode in ("wild", "auto", "agent"):
        skill = skills[f"l1_{mode}_session"]
        assert set(skill["variables"]) == L1_VARIABLES and skill["description"]
    assert "goal" in skills["wild_v2_planning"]["variables"]


def test_read_one(api):
    body = api("get", "/api/skills/l1_auto_session").json()
    assert body["template"].startswith("<!-- agentsys-prompt: chat-auto -->")
    assert "{{children_status}}" in body["template"] and "---" not in body["template"][:5]


def test_an_edit_is_what_the_next_prompt_renders(api, settings):
    template = "<!-- agentsys-prompt: chat-auto -->\nWork in {{workdir}}.\n{{#if memories}}M{{/if}}"
    response = api("put", "/api/skills/l1_auto_session", {"template": template})
    assert response.status_code == 200, response.content
    assert api("get", "/api/skills/l1_auto_session").json()["template"].strip() == template
    rendered = PromptSkills(settings.AGENTSYS_SKILLS_DIR).render(
        "l1_auto_session", {"workdir": "/w", "memories": ""}
    )
    assert rendered.strip() == "<!-- agentsys-prompt: chat-auto -->\nWork in /w."
    # The front matter (and so the variables) is kept.
    listed = {s["id"]: s for s in api("get", "/api/skills").json()}
    assert set(listed["l1_auto_session"]["variables"]) == L1_VARIABLES


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("Hello {{goal}}", "goal"),
        ("{{#if workdir}}open", "if"),
        ("", "empty"),
        ("x" * 300_000, "over the 204800 allowed"),
    ],
)
def test_a_bad_edit_is_422_with_its_problems_and_changes_nothing(api, template, problem):
    before = api("get", "/api/skills/l1_wild_session").json()["template"]
    response = api("put", "/api/skills/l1_wild_session", {"template": template})
    assert response.status_code == 422, response.content
    body = response.json()
    assert any(problem in line for line in body["problems"]), body
    assert api("get", "/api/skills/l1_wild_session").json()["template"] == before


@pytest.mark.parametrize("skill_id", ["nope", "..", "..%2F..%2Fetc", "L1_AUTO", "a" * 65])
def test_unknown_or_malformed_ids_are_404(api, skill_id):
    assert api("get", f"/api/skills/{skill_id}").status_code == 404
    assert api("put", f"/api/skills/{skill_id}", {"template": "x"}).status_code == 404


def test_an_extra_field_is_422(api):
    response = api("put", "/api/skills/l1_agent_session", {"template": "x", "name": "y"})
    assert response.status_code == 422
