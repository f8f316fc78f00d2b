"""What the shell commands print (issue 18 item 4): `make chat` shows the reply a person reads,
the model's action tags turned into one line each, even when a tag streams in pieces;
`make demo` shows the plan as its list and the reflection whole."""

from io import StringIO

import pytest

from agents_app.models import Agent
from research_app.management.commands.research import Command as ResearchCommand
from research_app.models import ResearchLoop
from sessions_app.chat_console import ActionTagFilter
from sessions_app.management.commands.chat import Command as ChatCommand

REPLY = (
    "I will hand this to a research loop: it plans and reports back.\n\n"
    "<spawn_research>\ngoal: Find the learning rate\nmax_iterations: 6\n</spawn_research>"
)


def _streamed(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


@pytest.mark.parametrize("size", [1, 3, 7, 500])
def test_action_tags_are_taken_out_of_a_streamed_reply_however_it_is_cut(size):
    part = ActionTagFilter()
    shown = "".join(part.feed(delta) for delta in _streamed(REPLY, size)) + part.flush()
    assert shown == "I will hand this to a research loop: it plans and reports back."


def test_text_that_only_looks_like_a_tag_is_kept():
    part = ActionTagFilter()
    text = "if a < b and <spawn this> or <stop_childhood> stays\n\nand  this"
    assert "".join(part.feed(d) for d in _streamed(text, 2)) + part.flush() == text


def test_make_chat_prints_the_reply_and_a_line_for_the_action():
    out = StringIO()
    command = ChatCommand(stdout=out)
    started: set[str] = set()
    for delta in _streamed(REPLY, 4):
        command._show("part_delta", {"id": "p1", "ptype": "text", "delta": delta}, started)
    action = {
        "action": "spawn_research",
        "goal": "Find the learning rate",
        "agent_id": "orchestrator-1a2b3c4d",
        "error": "",
    }
    command._show("l1_action", action, started)
    command._show("session_status", {"outcome": "done"}, started)
    text = out.getvalue()
    assert "<spawn_research>" not in text and "max_iterations" not in text
    assert "reports back.\n  → Research loop orchestrator-1a2b3c4d started: Find the" in text
    assert started == {"orchestrator-1a2b3c4d"}
    refused = StringIO()
    ChatCommand(stdout=refused)._show(
        "l1_action", {"action": "spawn_research", "error": "not in agent mode"}, set()
    )
    assert refused.getvalue().strip() == "→ Could not start a research loop: not in agent mode"


def test_make_chat_says_a_loop_ended_in_one_line_not_the_report_twice():
    out = StringIO()
    report = "lr=0.05 won: the loss fell fastest.\nlr=0.5 diverged."
    notice = {  # as sessions_app.notices makes it
        "text": "The research loop “Find the lr” ended: done.",
        "href": "/research/research-1a2b/",
        "link": "See the loop",
    }
    command = ChatCommand(stdout=out)
    command._show("system_message", {"content": report, "notice": notice}, set())
    assert out.getvalue().strip() == (
        "[report] The research loop “Find the lr” ended: done. (/research/research-1a2b/)"
    )
    older = StringIO()  # an event stored before notices existed: the report's first line
    ChatCommand(stdout=older)._show("system_message", {"content": report}, set())
    assert older.getvalue().strip() == "[report] lr=0.05 won: the loss fell fastest."


PLAN = "1. Try lr 0.01, 0.05 and 0.1 for 200 steps.\n2. Refine around the best.\n3. Say DONE."
REFLECTION = (
    "The loss fell fastest at lr=0.05 and diverged at 0.5. " * 8
    + "\n\nNext time, start the search at 0.05 and try a cosine schedule."
)


@pytest.mark.django_db
def test_make_demo_prints_the_plan_as_a_list_and_the_whole_reflection():
    agent = Agent.objects.create(id="orchestrator-d3m0", role="orchestrator", status="done")
    history = [
        {"iteration": 0, "phase": "plan", "summary": "", "runs": [], "errors": []},
        {"iteration": 1, "phase": "iteration", "promise": "DONE", "summary": "lr=0.05 wins."},
        {
            "iteration": 1,
            "phase": "reflection",
            "promise": "REFLECT_STOP",
            "summary": REFLECTION[:300],
        },
    ]
    ResearchLoop.objects.create(
        agent=agent,
        goal="Find the lr",
        plan=PLAN,
        reflection=REFLECTION,
        state={"history": history},
    )
    out = StringIO()
    ResearchCommand(stdout=out)._follow(agent.pk, timeout=10)
    text = out.getvalue()
    assert "[plan 0]" not in text and " -:" not in text
    assert "[plan]\n    1. Try lr 0.01, 0.05 and 0.1 for 200 steps.\n    2. Refine" in text
    assert "[iteration 1] Done: the goal is met\n    lr=0.05 wins." in text
    assert "[reflection] the loop stops:\n    The loss fell fastest" in text
    assert "start the search at 0.05 and try a cosine schedule." in text  # past 300 characters
    assert text.rstrip().endswith(
        "research loop orchestrator-d3m0: done\n"
        "spent: 0 model tokens, $0.0000, 0.0000 GPU-hours, 0.0 min"
    )


@pytest.mark.parametrize("size", [1, 5, 500])
def test_attribute_and_json_tags_are_taken_out_too(size):
    reply = (
        'On it. <spawn_research goal="Tune lr > 0.1" max_iterations="5"/> Then\n'
        '<SPAWN_RESEARCH>{"goal": "b"}</spawn_research> and <spawn_research goal="c"> done.'
    )
    part = ActionTagFilter()
    shown = "".join(part.feed(delta) for delta in _streamed(reply, size)) + part.flush()
    assert shown == "On it.  Then\n and  done."


def test_make_chat_prints_the_note_under_the_action():
    out = StringIO()
    action = {
        "action": "spawn_research",
        "goal": "Tune lr",
        "agent_id": "orchestrator-1a2b3c4d",
        "error": "",
        "note": "WILD mode expects a research loop; one was started with the goal it gave",
    }
    ChatCommand(stdout=out)._show("l1_action", action, set())
    assert [line.strip() for line in out.getvalue().strip().splitlines()] == [
        "→ Research loop orchestrator-1a2b3c4d started: Tune lr",
        "Note: WILD mode expects a research loop; one was started with the goal it gave",
    ]
    unknown = StringIO()
    error = "<start_research> is not an action tag, so nothing was done with it (...)"
    refused = {"action": "start_research", "error": error}
    ChatCommand(stdout=unknown)._show("l1_action", refused, set())
    assert unknown.getvalue().strip() == f"→ Not carried out: {error}"


@pytest.mark.django_db
def test_make_demo_takes_a_budget_says_when_it_waits_and_prints_what_it_spent(tmp_path, settings):
    """Issue 38 from outside: `make demo DEMO_ARGS="--llm-usd 0.05"` starts the loop with that
    cap; following it says once that it waits for approval, and its end prints its spending."""
    from django.core.management import CommandError, call_command

    from research_app.management.commands.research import spent_line

    settings.AGENTSYS_WORKDIR = tmp_path
    out = StringIO()
    call_command(
        "research", "start", "Tune lr", "--llm-usd", "0.05", "--gpu-hours", "1", stdout=out
    )
    loop = ResearchLoop.objects.get()
    assert loop.settings["budget"] == {"llm_usd": 0.05, "gpu_hours": 1.0, "on_cap": "hold_runs"}

    Agent.objects.filter(pk=loop.agent_id).update(status="running")
    loop.state = {"approval": {"kind": "cap", "reason": "its llm_usd cap is reached"}}
    loop.save()
    followed = StringIO()
    command = ResearchCommand(stdout=followed)
    with pytest.raises(CommandError, match="still running"):
        command._follow(loop.agent_id, timeout=1.2)
    said = followed.getvalue()
    assert said.count("waiting for your approval: its llm_usd cap is reached") == 1
    assert f"POST /api/research/{loop.agent_id}/approve" in said

    spent = {"llm_tokens": 12345, "llm_usd": 0.0512, "gpu_hours": 0.25, "wall_hours": 0.5}
    assert spent_line(spent, {"llm_usd": 0.05}) == (
        "spent: 12,345 model tokens, $0.0512 (cap $0.05), 0.2500 GPU-hours, 30.0 min"
    )
