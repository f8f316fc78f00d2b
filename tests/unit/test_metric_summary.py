"""A run's metrics summary (agentsys.metric_summary): what an agent and the research loop's
next prompt read of a run's metrics (issue 10 item 7)."""

import json

from agentsys.metric_summary import add_row, summarize_metrics


def test_metrics_are_summarized_per_series_skipping_bad_lines(tmp_path):
    path = tmp_path / "agent_metrics.jsonl"
    rows = [{"_step": 10, "loss": 4.0, "lr": 0.1}, {"_step": 20, "loss": 1.5, "lr": 0.1}]
    path.write_text(
        "\n".join(json.dumps(r) for r in rows)
        + "\nnot json\n[1]\n"
        + json.dumps({"_step": 30, "loss": 2.0, "note": "text"})
        + "\n"
    )
    summary = summarize_metrics(path)
    assert summary["loss"] == {
        "first": 4.0,
        "last": 2.0,
        "min": 1.5,
        "max": 4.0,
        "points": 3,
        "last_step": 30,
    }
    assert summary["lr"]["points"] == 2 and "note" not in summary and "_step" not in summary
    assert summarize_metrics(tmp_path / "missing.jsonl") == {}


def test_underscore_fields_and_steps_are_not_summarised_as_metrics():
    # What TensorBoard, MLflow and W&B rows carry besides their metrics: the results text
    # showed "_timestamp last=1.796e+09 ..." beside the loss (issue 20).
    summary = {}
    for step in (1, 2):
        add_row(summary, {"_step": step, "_timestamp": 1.8e9, "_runtime": 3.0, "loss": 1.0})
    add_row(summary, {"global_step": 7, "loss": 0.5})
    assert list(summary) == ["loss"]
    assert (summary["loss"]["points"], summary["loss"]["last_step"]) == (3, 7)


def test_a_nan_loss_shows_as_last_but_not_as_the_best(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"step": 1, "loss": 1.0}\n{"step": 2, "loss": NaN}\n')
    loss = summarize_metrics(path)["loss"]
    assert loss["min"] == 1.0 and loss["last"] != loss["last"]  # NaN


def test_odd_metric_values_are_skipped_without_crashing(tmp_path):
    path = tmp_path / "agent_metrics.jsonl"
    huge = "9" * 400
    path.write_text(
        f'{{"step": 1, "loss": 2.0, "flag": true, "big": {huge}}}\n'
        + "[" * 100000
        + '\n{"step": 2, "loss": 1.0}\n'
    )
    summary = summarize_metrics(path)
    assert set(summary) == {"loss"} and summary["loss"]["points"] == 2
    assert summary["loss"]["last_step"] == 2
