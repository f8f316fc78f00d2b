"""Pause that pauses (issue 34, item 1): a research loop paused in any phase does nothing
more until it is resumed, and stays paused across a restart of runagentd. Against a real
runagentd, the real OpenCode and the project's scripted model, made slow on purpose (a
`stall` in its script) so that the pause lands while the loop waits on it."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from agents_app.models import Agent
from agentsys.research.branch import worktree_of
from events_app.models import Event
from memory_app.models import MemoryEntry
from research_app.models import ResearchLoop
from scheduler_app.models import Run
from tests.e2e.test_research_e2e import (
    ITERATION_1,
    ITERATION_2,
    PLAN,
    REFLECTION,
    _turn,
    prompts_seen,
    start_loop,
    wait_finished,
    wait_for_prompt,
)
from tests.helpers import wait_until
from tests.mcp_opencode import research_servers, write_config

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

THINKING_SECONDS = 3.5  # the model's stall: the pause must land in it (~0.3 s at load 8)
HELD_SECONDS = 4.0  # watched after the pause: longer than what was left of the stall


def slow_turn(match: str, text: str) -> dict:
    """Answers, but only after THINKING_SECONDS: a pause in those seconds lands mid-answer."""
    steps = [{"reasoning": "thinking"}, {"stall": THINKING_SECONDS}, {"text": text}]
    return {"match": match, "steps": steps}


def one_experiment_script(goal: str, command: str, gpus: int) -> dict:
    """Plan, then one iteration that runs one experiment and says DONE, then reflect."""
    reply = f"""<experiments>
- goal: {goal}
  command: {command}
  gpu_required: {gpus}
</experiments>
<promise>DONE</promise>
<summary>One run: {goal}.</summary>"""
    return {
        "turns": [
            _turn(r"agentsys-prompt: planning", PLAN),
            _turn(r"Iteration 1 of", reply),
            _turn(r"agentsys-prompt: reflection", REFLECTION),
        ]
    }


def pause(api, loop_id: str) -> float:
    """Pause the loop; seconds until its row says paused (the pause acknowledged)."""
    sent = time.monotonic()
    assert api("post", f"/api/research/{loop_id}/pause").status_code == 202
    wait_until(
        lambda: Agent.objects.filter(pk=loop_id, status="paused").exists(),
        10,
        interval=0.02,
        message="the loop to say paused",
    )
    return time.monotonic() - sent


def loop_runs(loop_id: str):
    return Run.objects.filter(sweep_id=ResearchLoop.objects.get(pk=loop_id).sweep_id)


def held(loop_id: str, *, seconds: float = HELD_SECONDS) -> dict:
    """Watch the paused loop: it must stay paused, start no run and not move on."""
    phase = ResearchLoop.objects.get(pk=loop_id).state.get("phase")
    runs = set(loop_runs(loop_id).values_list("id", "status"))
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert Agent.objects.get(pk=loop_id).status == "paused"
        assert set(loop_runs(loop_id).values_list("id", "status")) == runs, "a run moved"
        time.sleep(0.1)
    state = ResearchLoop.objects.get(pk=loop_id).state
    assert state.get("phase") == phase, "the paused loop went on to its next step"
    return state


def resume(api, loop_id: str) -> None:
    assert api("post", f"/api/research/{loop_id}/resume").status_code == 202


def test_a_pause_while_the_model_thinks_aborts_it_and_asks_again_on_resume(
    api, workdir, make_daemon, scripted_llm
):
    make_daemon()
    scripted_llm.load(
        {
            "turns": [
                _turn(r"agentsys-prompt: planning", PLAN),
                slow_turn(r"Iteration 1 of", ITERATION_1),
                _turn(r"Iteration 1 of", ITERATION_1),  # asked again after the resume
                _turn(r"Iteration 2 of", ITERATION_2),
                _turn(r"agentsys-prompt: reflection", REFLECTION),
            ]
        }
    )
    loop_id = start_loop(api, workdir)
    wait_for_prompt(scripted_llm, "Iteration 1 of")
    acknowledged = pause(api, loop_id)
    print(f"\npause acknowledged while the model thinks: {acknowledged * 1000:.0f} ms")
    assert acknowledged < 5
    held(loop_id)
    assert not loop_runs(loop_id).exists()  # the reply that was on its way started nothing

    resume(api, loop_id)
    agent = wait_finished(loop_id)
    assert agent.status == "done", agent.error
    assert sum("Iteration 1 of" in p for p in prompts_seen(scripted_llm)) == 2
    assert loop_runs(loop_id).count() == 2  # one reply's experiments, once


def test_a_pause_while_the_loop_reflects_holds_its_memories(
    api, workdir, make_daemon, scripted_llm
):
    make_daemon()
    scripted_llm.load(
        {
            "turns": [
                _turn(r"agentsys-prompt: planning", PLAN),
                _turn(r"Iteration 1 of", ITERATION_2),  # DONE at once: no experiments
                slow_turn(r"agentsys-prompt: reflection", REFLECTION),
                _turn(r"agentsys-prompt: reflection", REFLECTION),
            ]
        }
    )
    loop_id = start_loop(api, workdir)
    wait_for_prompt(scripted_llm, "agentsys-prompt: reflection")
    pause(api, loop_id)
    state = held(loop_id)
    assert state["phase"] == "reflecting" and state["status"] == "running"
    assert not MemoryEntry.objects.filter(agent_id=loop_id, type="reflection").exists()

    resume(api, loop_id)
    agent = wait_finished(loop_id)
    assert agent.status == "done", agent.error
    # Written once, from the reply asked for after the resume.
    assert MemoryEntry.objects.filter(agent_id=loop_id, type="reflection").count() == 2


def test_a_loop_paused_while_its_run_waits_for_a_gpu_starts_nothing_until_resumed(
    api, workdir, make_daemon, scripted_llm
):
    """The loop's experiment is queued behind a person's run on the only GPU; the loop is
    paused; the GPU frees: the paused loop's run must stay queued until the resume."""
    make_daemon()
    blocker = api(
        "post",
        "/api/runs",
        {"name": "person's run", "command": "sleep 120", "gpu_required": 1, "auto_start": True},
    )
    assert blocker.status_code == 201, blocker.content
    blocker_id = blocker.json()["id"]
    wait_until(lambda: Run.objects.filter(pk=blocker_id, status="running").exists(), 30)
    scripted_llm.load(one_experiment_script("needs the GPU", "echo ran-on-gpu", gpus=1))
    loop_id = start_loop(api, workdir)
    queued = wait_until(
        lambda: loop_runs(loop_id).filter(status="queued").first(), 60, interval=0.05
    )
    pause(api, loop_id)
    assert api("post", f"/api/runs/{blocker_id}/stop").status_code == 200  # the GPU frees
    wait_until(lambda: Run.objects.filter(pk=blocker_id, status="stopped").exists(), 30)
    held(loop_id)  # the GPU is free, and still the paused loop's run waits
    assert Run.objects.get(pk=queued.pk).status == "queued"

    resume(api, loop_id)
    agent = wait_finished(loop_id)
    assert agent.status == "done", agent.error
    assert Run.objects.get(pk=queued.pk).status == "done"


def test_a_paused_loop_and_its_paused_run_stay_paused_across_a_runagentd_restart(
    api, workdir, make_daemon, scripted_llm
):
    daemon = make_daemon()
    ticking = "for i in $(seq 1 30); do echo tick >> ticks.txt; sleep 0.1; done"
    scripted_llm.load(one_experiment_script("a ticking run", ticking, gpus=0))
    loop_id = start_loop(api, workdir)
    run = wait_until(lambda: loop_runs(loop_id).filter(status="running").first(), 60, interval=0.05)
    ticks = Path(run.workdir) / "ticks.txt"  # the experiment runs in the loop's worktree
    # "running" is set when the process starts, before its shell writes a first tick: pause
    # once it has ticked, so the file whose size must not grow exists.
    wait_until(lambda: ticks.exists(), 20, interval=0.05, message="the run's first tick")
    pause(api, loop_id)
    wait_until(lambda: Run.objects.filter(pk=run.pk, status="paused").exists(), 20)

    daemon.stop(signal.SIGKILL)
    make_daemon()
    wait_until(
        lambda: Event.objects.filter(agent_id=loop_id, kind="resumed_after_restart").exists(),
        30,
        message="the new runagentd to take the loop back",
    )
    size = ticks.stat().st_size
    held(loop_id)
    assert Run.objects.get(pk=run.pk).status == "paused"
    assert ticks.stat().st_size == size  # its processes still suspended

    resume(api, loop_id)
    agent = wait_finished(loop_id)
    assert agent.status == "done", agent.error
    assert Run.objects.get(pk=run.pk).status == "done"
    assert ticks.read_text().count("tick") == 30


def test_a_loop_paused_before_any_runagentd_took_it_waits_until_resumed(
    api, workdir, make_daemon, scripted_llm
):
    """Pause in the loop's first moment, before a daemon has claimed it: the row is held (no
    409 "not started"), no daemon starts it, and the resume lets one start it."""
    scripted_llm.load(
        {
            "turns": [
                _turn(r"agentsys-prompt: planning", PLAN),
                _turn(r"Iteration 1 of", ITERATION_2),
                _turn(r"agentsys-prompt: reflection", REFLECTION),
            ]
        }
    )
    loop_id = start_loop(api, workdir)  # no runagentd is up yet
    assert pause(api, loop_id) < 5
    make_daemon()
    held(loop_id)
    assert Agent.objects.get(pk=loop_id).host_id is None  # not claimed while paused
    assert prompts_seen(scripted_llm) == []

    resume(api, loop_id)
    agent = wait_finished(loop_id)
    assert agent.status == "done", agent.error


def test_a_stop_while_the_model_thinks_ends_the_loop_and_starts_nothing(
    api, workdir, make_daemon, scripted_llm
):
    """Its model's MCP server (the workdir's opencode.json, carried into the loop's worktree)
    ends with it: OpenCode kept one for every loop that ever ran until it stopped itself."""
    write_config(workdir)
    make_daemon()
    scripted_llm.load(
        {
            "turns": [
                _turn(r"agentsys-prompt: planning", PLAN),
                slow_turn(r"Iteration 1 of", ITERATION_1),
            ]
        }
    )
    loop_id = start_loop(api, workdir)
    wait_for_prompt(scripted_llm, "Iteration 1 of")
    worktree = worktree_of(workdir, loop_id)
    assert len(research_servers(worktree)) == 1  # its tools, while it runs
    sent = time.monotonic()
    assert api("post", f"/api/research/{loop_id}/stop").status_code == 202
    agent = wait_finished(loop_id, timeout=30)
    print(f"\nstop while the model thinks: ended in {(time.monotonic() - sent) * 1000:.0f} ms")
    assert agent.status == "stopped"
    time.sleep(HELD_SECONDS)  # the reply that was on its way starts nothing
    assert not loop_runs(loop_id).exists()
    assert ResearchLoop.objects.get(pk=loop_id).state["status"] == "stopped"
    assert research_servers(worktree) == []
