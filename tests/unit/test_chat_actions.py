"""The L1 agent's action tags (issue 11 item 5): parsed from the model's own answer only,
multi-line values kept, quotes as written, code ignored, every unusable tag explained."""

from __future__ import annotations

import pytest

from agentsys.chat.actions import check_mode, missing_required_spawn, parse_actions, strip_actions


def test_each_kind_with_multi_line_values():
    text = """Here is my plan.
<spawn_research>
goal: Compare optimisers
on the small model, three seeds each
max_iterations: 12
</spawn_research>
<spawn_command>
goal: baseline
command: python train.py \\
  --lr 0.1
workdir: runs/a
</spawn_command>
<steer_child>
experiment_id: orchestrator-ab12cd34
context: Focus on Adam.
Skip SGD.
</steer_child>
<STOP_CHILD>
Experiment_ID: executor-00ff00ff
</STOP_CHILD>"""
    research, command, steer, stop = parse_actions(text)
    assert research.goal == "Compare optimisers\non the small model, three seeds each"
    assert research.max_iterations == 12 and not research.error
    assert command.command == "python train.py \\\n  --lr 0.1" and command.workdir == "runs/a"
    assert steer.experiment_id == "orchestrator-ab12cd34"
    assert steer.context == "Focus on Adam.\nSkip SGD."
    assert stop.action == "stop_child" and stop.experiment_id == "executor-00ff00ff"
    assert strip_actions(text) == "Here is my plan."


def test_quotes_inside_a_command_survive_and_wrapping_quotes_go():
    [inner] = parse_actions("<spawn_command>\ncommand: python -c 'print(1)'\n</spawn_command>")
    assert inner.command == "python -c 'print(1)'"
    assert inner.goal == "python -c 'print(1)'"  # a goal defaults to the command
    [wrapped] = parse_actions("<spawn_command>\ncommand: \"echo 'hi'\"\n</spawn_command>")
    assert wrapped.command == "echo 'hi'"
    [two] = parse_actions("<spawn_command>\ncommand: 'a' and 'b'\n</spawn_command>")
    assert two.command == "'a' and 'b'"


def test_tags_in_code_are_shown_not_used():
    text = (
        "Use this syntax:\n```\n<spawn_research>\ngoal: example\n</spawn_research>\n```\n"
        "or inline `<stop_child>experiment_id: x</stop_child>`."
    )
    assert parse_actions(text) == []
    assert strip_actions(text) == text


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("<spawn_research>\ngoal: g\nmax_iterations: ten\n</spawn_research>", "got 'ten'"),
        ("<spawn_research>\ngoal: g\nmax_iterations: 0\n</spawn_research>", "1 to 1000"),
        ("<spawn_research>\nmax_iterations: 3\n</spawn_research>", "needs a goal"),
        ("<spawn_command>\ngoal: g\n</spawn_command>", "needs a command"),
        ("<steer_child>\nexperiment_id: a-1\n</steer_child>", "needs a context"),
        ("<stop_child>\n</stop_child>", "needs an experiment_id"),
        ("<stop_child>\nexperiment_id: ../../etc\n</stop_child>", "is not an experiment id"),
        ("<spawn_research>\ngoal: " + "x" * 5001 + "\n</spawn_research>", "over 5000"),
        ("Starting.\n<spawn_research>\ngoal: g\n", "is never closed"),
    ],
)
def test_unusable_tags_say_why(text, error):
    [action] = parse_actions(text)
    assert error in action.error


def test_an_unclosed_tag_is_cut_from_the_saved_answer():
    assert strip_actions("Starting.\n<spawn_research>\ngoal: g\nmore") == "Starting."


def test_a_stray_closing_tag_is_ignored():
    assert parse_actions("done </stop_child> here") == []


def test_more_than_five_actions_are_capped_with_a_note():
    one = "<stop_child>\nexperiment_id: a-{n}\n</stop_child>\n"
    actions = parse_actions("".join(one.format(n=n) for n in range(8)))
    assert len(actions) == 6 and all(not a.error for a in actions[:5])
    assert "too many actions" in actions[5].error


def test_modes():
    [spawn] = parse_actions("<spawn_research>\ngoal: g\n</spawn_research>")
    [stop] = parse_actions("<stop_child>\nexperiment_id: a-1\n</stop_child>")
    assert check_mode(spawn, "wild") == check_mode(spawn, "auto") == ""
    assert check_mode(stop, "auto") == ""
    assert "AGENT mode" in check_mode(spawn, "agent") and "AGENT mode" in check_mode(stop, "agent")
    assert missing_required_spawn([spawn], "wild") == ""
    assert "WILD mode" in missing_required_spawn([stop], "wild")
    assert missing_required_spawn([], "auto") == ""
    broken = parse_actions("<spawn_research>\n</spawn_research>")
    assert "WILD mode" in missing_required_spawn(broken, "wild")


@pytest.mark.parametrize(
    "garbage",
    [
        "<spawn_research",
        "<<spawn_research>>",
        "</spawn_research><spawn_research>",
        "é\x00<>",
        "```<spawn_research>",
        "<spawn_research>goal: x</spawn_research>" * 3,
    ],
)
def test_garbage_never_raises(garbage):
    parse_actions(garbage)
    strip_actions(garbage)


def test_a_megabyte_answer_is_parsed_fast():
    text = ("word `code` " * 90_000) + "<stop_child>\nexperiment_id: a-1\n</stop_child>"
    [action] = parse_actions(text)  # a regex gone quadratic would hit the test timeout
    assert action.experiment_id == "a-1"
