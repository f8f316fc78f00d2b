"""The loop page's branch card names the best run of the loop's comparison: a run its model
ran beside it, saying `(not compared)` in its goal (the run's name), is nobody's best even
with the lowest loss; when only such runs logged a loss, the card says none is compared."""

import pytest

from agents_app.models import Agent
from agentsys.research.branch import LoopBranch
from research_app import progress
from research_app.models import ResearchLoop
from scheduler_app.metrics.series import record_rows
from scheduler_app.models import Run, Sweep

pytestmark = pytest.mark.django_db

SHOWCASE = "show metrics logged as printed lines (not compared)"


def a_loop(tmp_path, runs: dict[str, float]) -> ResearchLoop:
    """A loop on its own branch whose sweep holds `runs` (name: final loss)."""
    agent = Agent.objects.create(
        id="research-best", role="research", cls_path="x", project="p", status="running"
    )
    sweep = Sweep.objects.create(name="Research: lr")
    for i, (name, loss) in enumerate(runs.items()):
        executor = Agent.objects.create(
            id=f"executor-{i}", role="executor", cls_path="x", project="p"
        )
        run = Run.objects.create(name=name, command="python t.py", agent=executor, sweep=sweep)
        record_rows(agent_id=executor.id, run_id=run.pk, rows=[{"_step": 9, "loss": loss}])
    where = str(tmp_path)
    on_branch = LoopBranch("agentsys/research-best", "0" * 40, where, where, where)
    return ResearchLoop.objects.create(
        agent=agent,
        sweep=sweep,
        goal="Lower the loss",
        settings={"workdir": where, "max_iterations": 5},
        state={"history": [], "phase": "iterating", "branch": on_branch.as_dict()},
    )


def test_the_best_run_is_the_best_compared_one(browser, tmp_path):
    loop = a_loop(tmp_path, {"lr 0.1 seed 0": 0.25, SHOWCASE: 0.125, "lr 0.5 seed 0": 0.5})
    page = browser.get(f"/research/{loop.agent_id}/").content.decode()
    best = page.split('<p class="best">', 1)[1].split("</p>", 1)[0]
    assert "lr 0.1 seed 0" in best and "0.25" in best and "not compared" not in best
    # The chat's loop card and the progress line name the same run.
    assert progress.loop_progress(loop.agent_id)["best"]["run_name"] == "lr 0.1 seed 0"
    assert progress.best_loss(loop.sweep_id)["run_name"] == SHOWCASE  # of every run


def test_with_only_runs_out_of_the_comparison_the_card_says_none_is_compared(browser, tmp_path):
    loop = a_loop(tmp_path, {SHOWCASE: 0.125})
    page = browser.get(f"/research/{loop.agent_id}/").content.decode()
    assert "Best run: none compared yet" in page and '<p class="best">' not in page
    assert progress.best_loss(loop.sweep_id, compared_only=True) is None


def test_a_loop_whose_runs_logged_no_loss_says_nothing_of_a_best_run(browser, tmp_path):
    loop = a_loop(tmp_path, {})
    page = browser.get(f"/research/{loop.agent_id}/").content.decode()
    assert "Best run" not in page and 'id="loop-branch"' in page


def test_the_progress_line_says_what_woke_the_loop_while_runs_go_on(browser, tmp_path):
    """Issue 39 §3: a loop reading its runs as they end says what woke it last, and how many
    runs go on; once none does, the line is gone."""
    loop = a_loop(tmp_path, {"lr 0.1 seed 0": 0.25})
    woke = "run run-1 (lr=0.5) ended stopped: stopped by its rule: loss is NaN or inf: nan"
    loop.state = {**loop.state, "woke": woke, "running": [{"goal": "a"}, {"goal": "b"}]}
    loop.save()
    line = browser.get(f"/research/{loop.agent_id}/progress/").content.decode()
    assert f"Woken as 2 runs went on: <bdi>{woke}</bdi>" in line
    loop.state = {**loop.state, "running": []}
    loop.save()
    assert "Woken as" not in browser.get(f"/research/{loop.agent_id}/progress/").content.decode()
