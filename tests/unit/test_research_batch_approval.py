"""Approvals by autonomy level (issue 38 §3): cautious asks before every batch, balanced only
for a batch of many GPUs or one expected to pass the GPU-hour cap, full never."""

from agentsys.research.batch_approval import expected_gpu_hours, why_ask
from agentsys.research.entries import ExperimentSpec


def batch(*gpus):
    return [
        ExperimentSpec(goal=f"run {n}", command="python train.py", gpu_required=g)
        for n, g in enumerate(gpus)
    ]


def test_cautious_asks_before_every_batch_and_full_never():
    assert "every batch waits for you (2 runs, 1 GPUs)" in why_ask(
        "cautious", batch(0, 1), gpus_allowed=4, expected=None, gpu_left=None
    )
    assert why_ask("full", batch(8, 8), gpus_allowed=4, expected=9.0, gpu_left=0.1) == ""


def test_balanced_asks_for_many_gpus_or_a_batch_that_would_pass_the_cap():
    small = batch(1, 1)
    assert why_ask("balanced", small, gpus_allowed=4, expected=0.5, gpu_left=1.0) == ""
    many = why_ask("balanced", batch(4, 2), gpus_allowed=4, expected=None, gpu_left=None)
    assert many == "the batch needs 6 GPUs, more than the 4 it may take unasked"
    over = why_ask("balanced", small, gpus_allowed=4, expected=2.0, gpu_left=1.5)
    assert over == "the batch is expected to take 2 GPU-hours, more than the 1.5 left of its cap"


def test_the_expected_gpu_hours_come_from_its_earlier_batches():
    assert expected_gpu_hours(batch(1, 2), []) is None
    history = [
        {"runs": ["a"], "experiments_s": 1800},
        {"runs": ["b"], "experiments_s": 3600},
        {"runs": [], "experiments_s": 0},
    ]
    assert expected_gpu_hours(batch(1, 2), history) == 3 * 0.75
