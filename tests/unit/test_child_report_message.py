"""What the session agent is told when a command run it started ends: its metrics from
whatever the script logged with, so the person's summary can name them."""

from agentsys.chat.reports import child_report_message

REPORT = {
    "id": "exec-1",
    "kind": "command",
    "status": "done",
    "goal": "python train.py",
    "exit_code": 0,
    "metrics": [
        {
            "key": "loss",
            "source": "tensorboard",
            "points": 10,
            "last_step": 100,
            "last": 0.125,
            "min": 0.1,
            "max": 2.5,
            "non_finite": 0,
        },
        {"key": "acc", "source": "wandb", "points": 3, "last": None, "non_finite": 3},
    ],
    "logged_params": {"lr": 0.1, "optimizer": "sgd"},
    "tracker_urls": {"wandb": "https://wandb.ai/a/p/runs/r"},
}


def test_a_finished_runs_report_names_each_metric_its_values_and_source():
    message = child_report_message(REPORT)
    assert (
        "- loss: last 0.125, min 0.1, max 2.5 over 10 points (to step 100), from tensorboard"
        in message
    )
    assert "- acc: last —, min —, max — over 3 points, 3 NaN/inf, from wandb" in message
    assert "Params the script logged: lr=0.1, optimizer=sgd" in message
    assert "Also logged online (wandb): https://wandb.ai/a/p/runs/r" in message


def test_a_run_without_metrics_has_no_metrics_section():
    message = child_report_message({k: v for k, v in REPORT.items() if k != "metrics"})
    assert "## Metrics" not in message
