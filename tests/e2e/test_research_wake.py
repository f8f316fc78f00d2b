"""A research loop woken by what its runs do (issue 39 §3), through a real runagentd, the real
OpenCode and the scripted model: of a batch of two, one run's loss turns NaN; the loop's
default rule stops it, and the loop is asked again at once, its prompt saying what woke it and
which run still goes on, well before the batch has ended. It reads the other's result when
that one ends."""

from __future__ import annotations

import re
import subprocess

import pytest

from research_app.models import ResearchLoop
from scheduler_app.models import Run
from tests.e2e.test_research_e2e import (
    PLAN,
    REFLECTION,
    _turn,
    prompts_seen,
    start_loop,
    wait_finished,
)
from tests.e2e.test_research_replies import iteration_prompt

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SLOW_SECONDS = 25
DIVERGES = (
    "import time\n"
    "for step in range(600):\n"
    "    print(f'step {step} | loss {\"nan\" if step >= 3 else 1.0 / (step + 1)}', flush=True)\n"
    "    time.sleep(0.1)\n"
)
SLOW = f"import time\ntime.sleep({SLOW_SECONDS})\nprint('step 1 | loss 0.25', flush=True)\n"
BATCH = """<experiments>
- goal: diverges
  command: python diverges.py
  gpu_required: 0
- goal: slow but sound
  command: python slow.py
  gpu_required: 0
</experiments>
<summary>Two runs.</summary>
<promise>WAITING</promise>"""
DONE = "<summary>Enough: the NaN run is out.</summary>\n<promise>DONE</promise>"


def _prepare(workdir, make_daemon, scripted_llm, scripts: dict[str, str], batch: str) -> None:
    """Commit the scripts, start runagentd, and script the model: a plan, `batch`, DONE."""
    for name, text in scripts.items():
        (workdir / name).write_text(text)
    for args in (["add", *scripts], ["commit", "-q", "-m", "the runs"]):
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args]
        subprocess.run(git, cwd=workdir, check=True)
    make_daemon()
    scripted_llm.load(
        {
            "turns": [
                _turn(r"agentsys-prompt: planning", PLAN),
                _turn(r"Iteration 1 of", batch),
                _turn(r"Iteration 2 of", DONE),
                _turn(r"agentsys-prompt: reflection", REFLECTION),
            ]
        }
    )


def test_a_nan_run_wakes_the_loop_before_its_batch_ends(api, workdir, make_daemon, scripted_llm):
    _prepare(workdir, make_daemon, scripted_llm, {"diverges.py": DIVERGES, "slow.py": SLOW}, BATCH)
    loop_id = start_loop(api, workdir, max_iterations=3)
    agent = wait_finished(loop_id, timeout=120)
    assert agent.status == "done", agent.error

    runs = Run.objects.filter(sweep_id=ResearchLoop.objects.get(pk=loop_id).sweep_id)
    diverged = runs.get(command__contains="diverges.py")
    slow = runs.get(command__contains="slow.py")
    assert diverged.status == "stopped"
    assert diverged.stopped_by == "loss is NaN or inf: nan at step 3"
    assert slow.status == "done"

    second = iteration_prompt(scripted_llm, 2)
    woke = (
        f"What woke you: run {diverged.pk} (diverges) ended stopped: stopped by its rule: "
        "loss is NaN or inf: nan at step 3"
    )
    assert woke in second
    going = second.split("## Experiments still running", 1)[1]
    assert f"- run {slow.pk}: slow but sound (`python slow.py`" in going
    status = next(line for line in second.splitlines() if line.startswith("- status: "))
    assert status.startswith("- status: stopped (exit code ")
    assert status.endswith("): stopped by its rule: loss is NaN or inf: nan at step 3")
    # Its metrics, as stored from its printed lines (a stopped run writes no result).
    metrics = next(line for line in second.splitlines() if line.startswith("- metrics: "))
    # (rows after step 3 may have been stored in the same read as the one that met the rule)
    assert metrics.startswith("- metrics: loss last=nan min=0.") and " max=1 " in metrics

    detail = api("get", f"/api/research/{loop_id}").json()
    first, then = (s for s in detail["history"] if s["phase"] == "iteration")
    # Iteration 1 ended with the NaN run, long before the slow one: not at the batch's end;
    # iteration 2 (its reply launched nothing) read the slow one as it ended.
    assert [run["id"] for run in first["runs"]] == [diverged.pk]
    assert [run["id"] for run in then["runs"]] == [slow.pk]
    assert first["duration_s"] < SLOW_SECONDS / 2
    # The reflection read the slow run's result.
    reflection = next(p for p in prompts_seen(scripted_llm) if "agentsys-prompt: reflection" in p)
    assert "slow but sound" in reflection.split("### Experiment 1: ", 1)[1].splitlines()[0]


CONVERGES = (
    "import time\n"
    "for step in range(80):\n"
    "    print(f'step {step} | loss {1.0 / (step + 1)}', flush=True)\n"
    "    time.sleep(0.1)\n"
)
ONE_RUN = """<experiments>
- goal: converging
  command: python converges.py
  gpu_required: 0
</experiments>
<summary>One run.</summary>
<promise>WAITING</promise>"""


def test_a_metric_crossing_wakes_the_loop_while_its_run_goes_on(
    api, workdir, make_daemon, scripted_llm
):
    """`wake_when` [{"metric": "loss", "below": 0.3}]: the loop is asked again as its run's
    loss crosses 0.3, the run still going; told so once (the next wait reads the run's end,
    not the same crossing again)."""
    _prepare(workdir, make_daemon, scripted_llm, {"converges.py": CONVERGES}, ONE_RUN)
    refused = api("post", "/api/research", {"goal": "g", "wake_when": ["all_ended"]})
    assert refused.status_code == 422, refused.content
    assert "all_ended wakes the loop already" in refused.text
    conditions = [{"metric": "loss", "below": 0.3}]
    loop_id = start_loop(api, workdir, max_iterations=3, wake_when=conditions)
    agent = wait_finished(loop_id, timeout=120)
    assert agent.status == "done", agent.error

    run = Run.objects.get(sweep_id=ResearchLoop.objects.get(pk=loop_id).sweep_id)
    assert run.status == "done" and run.stopped_by == ""
    second = iteration_prompt(scripted_llm, 2)
    woke = re.escape(f"What woke you: run {run.pk} (converging) reached loss 0.") + (
        r"\d+ at step \d+ \(loss below 0\.3\)"
    )
    assert re.search(woke, second), second
    going = second.split("## Experiments still running", 1)[1]
    assert f"- run {run.pk}: converging (`python converges.py`" in going

    detail = api("get", f"/api/research/{loop_id}").json()
    first, then = (s for s in detail["history"] if s["phase"] == "iteration")
    # Iteration 1 ended as the loss crossed 0.3 (step 3 of 80, 0.1 s apart), no result read;
    # iteration 2 waited for the run's end, not woken by the same crossing again.
    assert first["runs"] == [] and first["duration_s"] < 4, first
    assert [r["id"] for r in then["runs"]] == [run.pk]
    assert detail["settings"]["wake_when"] == conditions
