"""Issue 22: a research loop whose experiments run on SLURM. The demo loop (the scripted LLM
behind the real OpenCode) started with `backend: slurm`; its two experiments become sbatch
jobs on the real test cluster (tests/slurm_cluster.py), the GPU one on a GPU SLURM gave it,
and the loop reads their metrics as it does for local runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentsys.slurm import client as slurm
from research_app.models import ResearchLoop
from scheduler_app.models import GPU, Run
from tests.e2e.test_research_e2e import happy_script, start_loop, wait_finished
from tests.slurm_cluster import bring_up_slurm

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def slurm_daemon(make_daemon):
    bring_up_slurm()
    daemon = make_daemon(AGENTSYS_SLURM="on", AGENTSYS_GPUS="")
    yield daemon
    for job_id in Run.objects.exclude(slurm_job_id=None).values_list("slurm_job_id", flat=True):
        slurm.cancel(job_id)


def test_the_demo_loop_runs_its_experiments_as_slurm_jobs(api, workdir, slurm_daemon, scripted_llm):
    scripted_llm.load(happy_script())
    loop_id = start_loop(api, workdir, backend="slurm", slurm={"time_limit": "10"})
    agent = wait_finished(loop_id, timeout=120)
    assert agent.status == "done", agent.error

    loop = ResearchLoop.objects.get(pk=loop_id)
    runs = {run.params["lr"]: run for run in Run.objects.filter(sweep_id=loop.sweep_id)}
    assert set(runs) == {0.05, 0.2} and all(r.status == "done" for r in runs.values())
    jobs = slurm.job_states([run.slurm_job_id for run in runs.values()])
    assert {state.state for state in jobs.values()} == {"COMPLETED"}
    assert all(run.executor_options["backend"] == "slurm" for run in runs.values())
    assert not GPU.objects.exists()  # SLURM placed them: the host declared no GPU

    # The GPU experiment saw the GPU SLURM gave it; the loop read both runs' metrics.
    found = Path(runs[0.2].workdir) / "found.md"  # in the loop's worktree
    assert found.read_text().strip() in {"gpu 0", "gpu 1"}
    detail = api("get", f"/api/research/{loop_id}").json()
    assert len(detail["history"][1]["runs"]) == 2
    sweep = api("get", f"/api/sweeps/{loop.sweep_id}/table").json()
    assert sweep["total"] == 2
