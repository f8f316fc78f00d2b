"""A SLURM executor's events carry its run's row (agentsys.slurm.job.job_state_of_event):
runagentd's store applies exactly these as it records them."""

from agentsys.slurm.job import job_state_of_event


def test_submitted_pending_and_started_move_the_row():
    assert job_state_of_event("slurm_job_submitted", {"job_id": 7, "run_dir": "/r"}) == (
        7,
        False,
        "submitted",
    )
    assert job_state_of_event("slurm_job_pending", {"job_id": 7, "reason": "Resources"}) == (
        7,
        False,
        "Resources",
    )
    assert job_state_of_event("run_started", {"job_id": 7, "attempt": 0}) == (7, True, "")


def test_other_events_and_a_local_runs_start_do_not():
    # A local run's start names a pid, not a job: its row moves with its executor instead.
    assert job_state_of_event("run_started", {"pid": 123, "attempt": 0}) is None
    assert job_state_of_event("slurm_job_adopted", {"job_id": 7}) is None
    assert job_state_of_event("slurm_job_pending", {"job_id": True, "reason": "x"}) is None
    assert job_state_of_event("slurm_job_pending", {"job_id": "7", "reason": "x"}) is None
