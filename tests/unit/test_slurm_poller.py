"""runagentd's SLURM poller without a cluster: one query per tick for every watched job, each
executor told only what changed, an unreachable controller said to each (and the state told
again once it answers), a job SLURM no longer knows said every tick (the executor counts)."""

import asyncio

import pytest

from agentsys.ipc import Cmd
from agentsys.slurm.client import JobState, SlurmError
from agentsys.slurm.poller import SlurmPoller, SlurmUnavailable, detect


class Cluster:
    def __init__(self):
        self.states: dict[int, JobState] = {}
        self.calls: list[list[int]] = []
        self.down = ""

    def __call__(self, job_ids):
        self.calls.append(sorted(job_ids))
        if self.down:
            raise SlurmError(self.down)
        return {job_id: self.states[job_id] for job_id in job_ids if job_id in self.states}


def _poller():
    cluster, told = Cluster(), []
    poller = SlurmPoller(
        lambda agent_id, message: told.append((agent_id, message)) or True, cluster
    )
    return poller, cluster, told


def test_one_query_per_tick_and_only_changes_are_told():
    poller, cluster, told = _poller()
    cluster.states = {1: JobState("PENDING", "Priority"), 2: JobState("RUNNING")}
    poller.watch("a", 1)
    poller.watch("b", 2)
    asyncio.run(poller.poll())
    assert cluster.calls == [[1, 2]]
    assert [(agent, m["state"], m["reason"]) for agent, m in told] == [
        ("a", "PENDING", "Priority"),
        ("b", "RUNNING", None),
    ]
    assert all(m["t"] == Cmd.JOB_STATE for _, m in told)

    told.clear()
    asyncio.run(poller.poll())  # nothing changed: nobody is told
    assert told == [] and len(cluster.calls) == 2

    cluster.states[1] = JobState("PENDING", "Resources")
    cluster.states[2] = JobState("COMPLETED", exit_code=0)
    asyncio.run(poller.poll())
    assert [(agent, m["state"], m["reason"], m["exit_code"]) for agent, m in told] == [
        ("a", "PENDING", "Resources", None),
        ("b", "COMPLETED", None, 0),
    ]


def test_a_forgotten_job_is_not_asked_about_and_no_jobs_means_no_query():
    poller, cluster, told = _poller()
    asyncio.run(poller.poll())
    assert cluster.calls == []
    poller.watch("a", 7)
    poller.forget("a")
    asyncio.run(poller.poll())
    assert cluster.calls == [] and told == []


def test_a_job_slurm_does_not_know_is_told_every_tick():
    poller, _, told = _poller()
    poller.watch("a", 9)
    asyncio.run(poller.poll())
    asyncio.run(poller.poll())
    assert [m["state"] for _, m in told] == [None, None]


def test_an_unreachable_controller_is_said_and_the_state_told_again_after():
    poller, cluster, told = _poller()
    cluster.states = {1: JobState("RUNNING")}
    poller.watch("a", 1)
    asyncio.run(poller.poll())
    cluster.down = "squeue did not answer within 30 s (is slurmctld down?)"
    asyncio.run(poller.poll())
    assert told[-1][1] == {"t": Cmd.JOB_STATE, "job_id": 1, "error": cluster.down}
    cluster.down = ""
    asyncio.run(poller.poll())
    assert told[-1][1]["state"] == "RUNNING"  # the executor hears where its job stands


def test_a_re_adopting_executor_hears_the_state_again():
    poller, cluster, told = _poller()
    cluster.states = {1: JobState("RUNNING")}
    poller.watch("a", 1)
    asyncio.run(poller.poll())
    poller.watch("a", 1)  # its new worker announced the job again
    asyncio.run(poller.poll())
    assert [m["state"] for _, m in told] == ["RUNNING", "RUNNING"]


def test_detect_off_never_asks_and_on_without_slurm_says_why(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert detect("off") is None
    assert detect("auto") is None
    with pytest.raises(SlurmUnavailable) as refused:
        detect("on")
    assert str(refused.value) == "AGENTSYS_SLURM=on, but SLURM is not installed: no sbatch on PATH"
