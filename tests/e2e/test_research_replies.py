"""Replies as real models write them (issue 35 items 1, 2, 3 and 6), through a real
runagentd, the real OpenCode and the scripted model: a promise only mentioned in code does
not end the loop, a promise written loosely does, one reply cannot queue more than 8
experiments, and a ```yaml fence inside `<experiments>` does not break the command it wraps."""

from __future__ import annotations

from pathlib import Path

import pytest

from research_app.models import ResearchLoop
from scheduler_app.models import Run
from tests.e2e.test_research_e2e import (
    PLAN,
    REFLECTION,
    _iteration_steps,
    _turn,
    prompts_seen,
    start_loop,
    wait_finished,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

MENTIONS_DONE = """I am not done yet: I still need the lr=0.2 run. When the goal is reached I
will answer with `<promise>DONE</promise>`.
<summary>Still one run to go.</summary>"""

LOOSE_DONE = """lr=0.05 is the best.
<summary>Goal reached.</summary>
<promise>Done!</promise>"""

FENCED_COMMAND = """<experiments>
```yaml
- goal: a fenced block command
  gpu_required: 0
  command: |
    echo fenced-ok > fenced.txt
    echo second line
```
</experiments>
<summary>One fenced run.</summary>
<promise>WAITING</promise>"""

TWELVE = (
    "<experiments>\n"
    + "\n".join(f"- goal: run {k}\n  command: echo run-{k}\n  gpu_required: 0" for k in range(12))
    + "\n</experiments>\n<summary>Twelve runs.</summary>\n<promise>WAITING</promise>"
)


def script(*iterations: str) -> dict:
    return {
        "turns": [
            _turn(r"agentsys-prompt: planning", PLAN),
            *(_turn(rf"Iteration {n} of", text) for n, text in enumerate(iterations, start=1)),
            _turn(r"agentsys-prompt: reflection", REFLECTION),
        ]
    }


def iteration_prompt(scripted_llm, n: int) -> str:
    return next(p for p in prompts_seen(scripted_llm) if f"Iteration {n} of" in p)


def test_a_promise_only_mentioned_in_code_goes_on_and_a_loose_done_ends_the_loop(
    api, workdir, make_daemon, scripted_llm
):
    make_daemon()
    scripted_llm.load(script(MENTIONS_DONE, LOOSE_DONE))
    loop_id = start_loop(api, workdir, max_iterations=4)
    agent = wait_finished(loop_id)
    assert agent.status == "done", agent.error
    detail = api("get", f"/api/research/{loop_id}").json()
    assert _iteration_steps(detail) == [1, 2]  # not ended by the mention, ended by "Done!"
    iterations = [s for s in detail["history"] if s["phase"] == "iteration"]
    assert [s["promise"] for s in iterations] == [None, "DONE"]
    # The model is told why its mention did not count.
    assert "appeared only inside code" in iteration_prompt(scripted_llm, 2)


def test_twelve_experiments_run_eight_and_a_yaml_fenced_command_runs_and_is_reported_done(
    api, workdir, make_daemon, scripted_llm
):
    make_daemon()
    scripted_llm.load(script(TWELVE, FENCED_COMMAND, LOOSE_DONE))
    loop_id = start_loop(api, workdir, max_iterations=3)
    assert wait_finished(loop_id).status == "done"
    runs = Run.objects.filter(sweep_id=ResearchLoop.objects.get(pk=loop_id).sweep_id)
    # Iteration 1: the first 8 of 12 ran, and the model heard of the other 4.
    echoes = sorted(run.command for run in runs if run.command.startswith("echo run-"))
    assert echoes == sorted(f"echo run-{k}" for k in range(8))
    note = "4 of your 12 experiments were refused and not run: at most 8 run per iteration"
    detail = api("get", f"/api/research/{loop_id}").json()
    first = next(s for s in detail["history"] if s["iteration"] == 1)
    assert any(note in error for error in first["errors"]), first["errors"]
    assert note in iteration_prompt(scripted_llm, 2)
    # Iteration 2: the command in a ```yaml fence ran as written and was reported done.
    fenced = runs.get(command__contains="fenced-ok")
    assert (fenced.status, fenced.exit_code) == ("done", 0) and "```" not in fenced.command
    assert (Path(fenced.workdir) / "fenced.txt").read_text().strip() == "fenced-ok"
    third = iteration_prompt(scripted_llm, 3)
    assert "- status: done (exit code 0)" in third.split("a fenced block command")[1]
