"""Prompt templates (issue 10 item 5): placeholders, conditional sections, and the real
research SKILL.md files rendered with every variable."""

import os
import re
import time

import pytest

from agentsys.prompts import render
from agentsys.research.reply import END_MARKER
from agentsys.skills import PromptSkills, SkillNotFound
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
    os.utime(path, (time.time() + 5, time.time() + 5))
    assert skills.render("s", {"x": 2}) == "second 2"


def test_false_and_zero_hide_a_block_like_empty_text():
    template = "{{#if flag}}shown{{/if}}"
    for hidden in (False, 0, None, "", "  "):
        assert render(template, {"flag": hidden}) == "", hidden
    for shown in (True, 1, "false", "x"):
        assert render(template, {"flag": shown}) == "shown", shown


def test_the_evo_sweep_hint_follows_the_setting():
    skills = PromptSkills(DEFAULT_SKILLS_DIR)
    off = skills.render("wild_v2_iteration", {**VARIABLES, "evo_sweep_enabled": False})
    on = skills.render("wild_v2_iteration", {**VARIABLES, "evo_sweep_enabled": True})
    assert "Evolutionary sweeps are enabled" not in off
    assert "Evolutionary sweeps are enabled" in on


def test_blocks_nest_and_stray_block_tags_vanish():
    template = "{{#if a}}A{{#if b}}B{{/if}}{{/if}}|{{#if c}}left open {{/if}}{{/if}}"
    assert render(template, {"a": 1, "b": 1, "c": 1}) == "AB|left open "
    assert render(template, {"a": 1}) == "A|"
    assert render("x {{#if a}} y", {"a": 1}) == "x  y"


def test_a_hidden_block_leaves_no_pile_of_blank_lines_but_values_keep_theirs():
    template = "top\n\n{{#if a}}\nA\n{{/if}}\n\n{{v}}\nend"
    assert render(template, {"v": "1\n\n\n\n2"}) == "top\n\n1\n\n\n\n2\nend"


def test_windows_line_endings_and_a_missing_front_matter(tmp_path):
    (tmp_path / "crlf").mkdir()
    (tmp_path / "crlf" / "SKILL.md").write_bytes(b"---\r\nname: crlf\r\n---\r\nbody {{x}}\r\n")
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "SKILL.md").write_text("just {{x}}")
    skills = PromptSkills(tmp_path)
    assert skills.render("crlf", {"x": 1}) == "body 1\n"
    assert skills.render("bare", {"x": 2}) == "just 2"


def test_an_edit_with_the_same_timestamp_is_still_seen(tmp_path):
    path = tmp_path / "s" / "SKILL.md"
    path.parent.mkdir()
    path.write_text("one")
    stamp = path.stat().st_mtime_ns
    skills = PromptSkills(tmp_path)
    assert skills.get("s") == "one"
    path.write_text("two, longer")
    os.utime(path, ns=(stamp, stamp))
    assert skills.get("s") == "two, longer"


def test_an_unreadable_skill_is_a_skill_not_found_naming_the_path(tmp_path):
    path = tmp_path / "dir" / "SKILL.md"
    path.mkdir(parents=True)
    with pytest.raises(SkillNotFound, match=f"cannot read {re.escape(str(path))}"):
        PromptSkills(tmp_path).get("dir")


@pytest.mark.parametrize("skill", ["wild_v2_planning", "wild_v2_iteration", "wild_v2_reflection"])
def test_every_research_skill_ends_with_the_end_marker(skill):
    text = PromptSkills(DEFAULT_SKILLS_DIR).render(skill, VARIABLES)
    assert text.rstrip().splitlines()[-1] == END_MARKER
    assert text.count(END_MARKER) == 1


def test_the_iteration_prompt_shows_problems_warnings_and_memories_only_when_given():
    skills = PromptSkills(DEFAULT_SKILLS_DIR)
    quiet = {**VARIABLES, "memories_text": "", "parse_problems": "", "struggle_warning": ""}
    plain = skills.render("wild_v2_iteration", quiet)
    assert "Problems with your previous answer" not in plain
    assert "What we learned before" not in plain and "struggling" not in plain
    loud = skills.render(
        "wild_v2_iteration",
        {
            **VARIABLES,
            "parse_problems": "- experiment 1 ('x'): no command; it was not run",
            "struggle_warning": "## Warning: the loop is struggling\n- same error",
        },
    )
    assert "Problems with your previous answer" in loud and "no command; it was not run" in loud
    assert "## Warning: the loop is struggling" in loud
    assert "What we learned before\n\n- [hyperparams] lr=0.1" in loud


def test_a_missing_skill_is_caught_as_a_missing_file_and_as_a_missing_key(tmp_path):
    from agentsys import skills as skill_files

    with pytest.raises(FileNotFoundError):
        PromptSkills(tmp_path).get("nope")
    with pytest.raises(LookupError):
        skill_files.read(tmp_path, "nope")
