"""Prompt templates (issue 10 item 5): placeholders, conditional sections, and the real
research SKILL.md files rendered with every variable."""

import time

import pytest

from agentsys.prompts import PromptSkills, SkillNotFound, render
from tests.helpers import REPO

DEFAULT_SKILLS_DIR = REPO / "skills"

VARIABLES = {
    "goal": "Find the best lr {{plan}}",
    "iteration": 3,
    "max_iterations": 25,
    "session_id": "orchestrator-1",
    "workdir": "/w",
    "tasks_path": "/w/.agents/wild/x/tasks.md",
    "log_path": "/w/.agents/wild/x/iteration_log.md",
    "steer_context": "",
    "history": "Plan: ...",
    "no_progress_streak": 0,
    "short_iteration_count": 0,
    "autonomy_level": "balanced",
    "memories_text": "- [hyperparams] lr=0.1",
    "evo_sweep_enabled": False,
    "experiment_results": "No experiments have run yet.",
    "struggle_warning": "",
    "parse_problems": "",
    "plan": "1. run",
}


def test_placeholders_take_values_and_unknown_ones_vanish():
    assert render("a {{ x }} b {{missing}} c {{flag}}", {"x": 1, "flag": True}) == "a 1 b  c true"


def test_values_are_not_expanded_again():
    assert render("{{goal}}", {"goal": "use {{secret}}", "secret": "no"}) == "use {{secret}}"


def test_conditional_blocks_show_only_for_non_empty_values():
    template = "A{{#if steer}}[steer: {{steer}}]{{/if}}B"
    assert render(template, {"steer": "go left"}) == "A[steer: go left]B"
    assert render(template, {"steer": ""}) == "AB"
    assert render(template, {}) == "AB"


@pytest.mark.parametrize(
    ("skill", "marker"),
    [
        ("wild_v2_planning", "<!-- agentsys-prompt: planning -->"),
        ("wild_v2_iteration", "<!-- agentsys-prompt: iteration -->"),
        ("wild_v2_reflection", "<!-- agentsys-prompt: reflection -->"),
    ],
)
def test_the_research_skills_render_fully_with_their_marker_first(skill, marker):
    text = PromptSkills(DEFAULT_SKILLS_DIR).render(skill, VARIABLES)
    assert text.splitlines()[0] == marker
    assert "{{" in VARIABLES["goal"] and text.count("{{") == 1  # only the goal's own text
    assert "Find the best lr" in text
    assert "---" not in text.splitlines()[0:2]


def test_the_iteration_prompt_says_which_iteration_and_shows_steer_only_when_given():
    skills = PromptSkills(DEFAULT_SKILLS_DIR)
    plain = skills.render("wild_v2_iteration", VARIABLES)
    assert "Iteration 3 of 25" in plain and "Guidance from the researcher" not in plain
    steered = skills.render("wild_v2_iteration", {**VARIABLES, "steer_context": "try lr=0.3"})
    assert "Guidance from the researcher" in steered and "try lr=0.3" in steered


def test_a_missing_skill_names_its_path(tmp_path):
    with pytest.raises(SkillNotFound, match=str(tmp_path / "nope" / "SKILL.md")):
        PromptSkills(tmp_path).get("nope")


def test_an_edited_skill_is_read_again(tmp_path):
    path = tmp_path / "s" / "SKILL.md"
    path.parent.mkdir()
    path.write_text("---\nname: s\n---\nfirst {{x}}")
    skills = PromptSkills(tmp_path)
    assert skills.render("s", {"x": 1}) == "first 1"
    time.sleep(0.01)
    path.write_text("second {{x}}")
    import os

    os.utime(path, (time.time() + 5, time.time() + 5))
    assert skills.render("s", {"x": 2}) == "second 2"
