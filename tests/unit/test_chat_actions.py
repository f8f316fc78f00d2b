"""The L1 agent's action tags (issue 11 item 5): parsed from the model's own answer only,
multi-line values kept, quotes as written, code ignored, every unusable tag explained."""

from __future__ import annotations

import pytest

from agentsys.chat.actions import (
    check_mode,
    missing_required_spawn,
    parse_actions,
    strip_actions,
    wild_fallback,
)


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


# -- the forms real models write (issue 35 item 5) ------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '<spawn_research goal="Tune the lr &amp; batch" max_iterations="5"/>',
        "<spawn_research goal='Tune the lr & batch' max_iterations=5 />",
        '<spawn_research goal="Tune the lr & batch" max_iterations="5">',
        '<spawn_research goal="Tune the lr & batch">\nmax_iterations: 5\n</spawn_research>',
        '<spawn_research>{"goal": "Tune the lr & batch", "max_iterations": 5}</spawn_research>',
        '<spawn_research>\n{\n  "goal": "Tune the lr & batch",\n  "max_iterations": "5",\n}\n'
        "</spawn_research>",
        '<spawn_research>\n```json\n{"spawn_research": {"goal": "Tune the lr & batch", '
        '"max_iterations": 5}}\n```\n</spawn_research>',
        "<spawn_research>\n```yaml\ngoal: Tune the lr & batch\nmax_iterations: 5\n```\n"
        "</spawn_research>",
    ],
)
def test_attribute_json_and_fenced_forms_keep_the_goal_and_iterations(text):
    [action] = parse_actions(f"Starting a loop.\n{text}\nIt will report back.")
    assert action.action == "spawn_research" and not action.error, action
    assert action.goal == "Tune the lr & batch" and action.max_iterations == 5
    assert strip_actions(f"Starting a loop.\n{text}\nIt will report back.") == (
        "Starting a loop.\n\nIt will report back."
    )


def test_a_json_command_and_attribute_ids():
    [run, stop] = parse_actions(
        '<spawn_command>{"command": ["python", "train.py"], "workdir": "runs/a"}</spawn_command>'
        '<stop_child experiment_id="executor-00ff00ff"/>'
    )
    assert run.command == "python train.py" and run.workdir == "runs/a" and not run.error
    assert stop.experiment_id == "executor-00ff00ff" and not stop.error


def test_a_known_tag_inside_an_unknown_one_still_counts():
    text = "<launch_actions>\n<spawn_research>\ngoal: b\n</spawn_research>\n</launch_actions>"
    unknown, spawn = parse_actions(text)
    assert "<launch_actions> is not an action tag" in unknown.error
    assert spawn.goal == "b" and not spawn.error


def test_a_lone_attribute_tag_does_not_swallow_the_next_tag():
    first, second = parse_actions(
        '<spawn_research goal="a">\n<spawn_research>\ngoal: b\n</spawn_research>'
    )
    assert (first.goal, second.goal) == ("a", "b")


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ('{"goal": "x", max_iterations: 4}', "looks like JSON but cannot be read"),
        ('{"goal": "x", "max_iterations": 4.5}', "got '4.5'"),
    ],
)
def test_a_json_body_that_cannot_be_used_says_why(body, error):
    [action] = parse_actions(f"<spawn_research>{body}</spawn_research>")
    assert error in action.error


def test_text_that_only_looks_like_a_tag_is_not_one():
    text = "if a < b and <spawn_research this is prose> or <stop_childhood>"
    assert [a.action for a in parse_actions(text)] == ["stop_childhood"]  # a verb: a note
    for other in (
        "if a < b and <spawn_research this is prose>",
        "<thinking>\ngoal: understand the question\n</thinking>",
        "<b>bold</b> and <br/> and <details><summary>More</summary></details>",
        "<promise>DONE</promise> and <experiments>none yet</experiments>",
        "`<start_research>goal: x</start_research>`",
    ):
        assert parse_actions(other) == [], other


@pytest.mark.parametrize(
    ("text", "name", "goal"),
    [
        (
            "<start_research>\ngoal: Tune lr\nmax_iterations: 3\n</start_research>",
            "start_research",
            "Tune lr",
        ),
        ('<spawn_experiment goal="Tune lr"/>', "spawn_experiment", "Tune lr"),
        ("<run_experiment>\ncommand: python train.py\n</run_experiment>", "run_experiment", ""),
        ('<launch_loop>{"goal": "Tune lr"}</launch_loop>', "launch_loop", "Tune lr"),
        ("<stop_experiment>experiment_id: a-1</stop_experiment>", "stop_experiment", ""),
        ("<experiments>\n- goal: Tune lr\n</experiments>", "experiments", "Tune lr"),
        ('<research goal="Tune lr"/>', "research", "Tune lr"),
    ],
)
def test_an_unknown_tag_that_looks_like_an_action_names_the_known_tags(text, name, goal):
    [action] = parse_actions("Sure.\n" + text)
    assert action.action == name and not action.known
    assert f"<{name}> is not an action tag" in action.error
    assert "<spawn_research>, <spawn_command>, <steer_child>, <stop_child>" in action.error
    assert action.goal == goal
    assert name in strip_actions("Sure.\n" + text)  # shown as written, not used


def test_wild_fallback_keeps_the_models_goal_where_it_can_be_read():
    unknown = "On it.\n<start_research>\ngoal: Tune lr\nmax_iterations: 3\n</start_research>"
    loop, note = wild_fallback(parse_actions(unknown), unknown, "which lr?")
    assert (loop.action, loop.goal, loop.max_iterations) == ("spawn_research", "Tune lr", 3)
    assert "WILD mode" in note and "the goal it gave in <start_research>" in note
    refused = "<spawn_research>\ngoal: Tune lr\nmax_iterations: many\n</spawn_research>"
    loop, note = wild_fallback(parse_actions(refused), refused, "which lr?")
    assert loop.goal == "Tune lr" and "<spawn_research>" in note


def test_wild_fallback_says_when_the_only_spawn_was_in_code():
    fenced = 'Here is the syntax:\n```\n<spawn_research goal="Tune lr"/>\n```\nShall I?'
    assert parse_actions(fenced) == []
    # A fence that says it holds a document, or holds the whole answer, is the answer
    # (agentsys.reply_text, as the research loop reads it).
    for meant in (
        'Here:\n```xml\n<spawn_research goal="Tune lr"/>\n```',
        '```\n<spawn_research goal="Tune lr"/>\n```',
    ):
        assert [a.goal for a in parse_actions(meant)] == ["Tune lr"], meant
    loop, note = wild_fallback([], fenced, "which lr?")
    assert loop.goal == "which lr?" and loop.max_iterations is None
    assert "only <spawn_research> is inside code" in note and "your message as its goal" in note
    loop, note = wild_fallback([], "No tags at all.", "which lr?")
    assert "inside code" not in note and "your message as its goal" in note


def test_a_megabyte_of_unknown_and_broken_tags_is_capped_and_fast():
    for garbage in ['<spawn_research goal="', "<start_research>{", "<spawn_research>{]}"]:
        parse_actions(garbage * 3)
        strip_actions(garbage * 3)
    parse_actions("<experiments>" + "\n" * 100_000 + "x</experiments>")  # blank lines
    parse_actions("<spawn_research " + 'a="b" ' * 20_000)
    text = '<spawn_research goal="' * 5_000 + "<launch_x>" * 20_000 + "</launch_x>"
    strip_actions(text)
    actions = parse_actions(text)  # a scan gone quadratic would hit the test timeout
    assert len(actions) == 6 and "too many actions" in actions[-1].error
    assert actions[0].action == "launch_x" and "not an action tag" in actions[0].error


def test_a_research_loop_may_name_the_project_it_works_on():
    """Issue 37 §1: "run a loop on ~/project" starts it there, not in the chat's folder."""
    [action] = parse_actions(
        "On it.\n<spawn_research>\ngoal: Tune lr\nmax_iterations: 3\n"
        "workdir: /home/ada/project\n</spawn_research>"
    )
    assert (action.action, action.workdir, action.error) == (
        "spawn_research",
        "/home/ada/project",
        "",
    )
