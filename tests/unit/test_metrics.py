import json
import math

import pytest

from agentsys.metrics import (
    AnomalyThresholds,
    LossAnomalyDetector,
    MetricsTail,
    loss_of,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def rows(*losses):
    return [{"_step": step, "loss": loss} for step, loss in enumerate(losses)]


def append(path, text: str) -> None:
    with path.open("a") as handle:
        handle.write(text)


# MetricsTail


def test_tail_returns_only_new_rows(tmp_path):
    path = tmp_path / "agent_metrics.jsonl"
    tail = MetricsTail(path)
    assert tail.read_new() == []  # not created yet
    append(path, '{"_step": 1, "loss": 1.5}\n{"_step": 2, "loss": 1.4}\n')
    assert tail.read_new() == [{"_step": 1, "loss": 1.5}, {"_step": 2, "loss": 1.4}]
    assert tail.read_new() == []
    append(path, '{"_step": 3, "loss": 1.3}\n')
    assert tail.read_new() == [{"_step": 3, "loss": 1.3}]


def test_tail_leaves_a_partial_line_for_the_next_call(tmp_path):
    path = tmp_path / "agent_metrics.jsonl"
    path.write_text('{"_step": 1, "loss": 1.5}\n{"_step": 2, "lo')
    tail = MetricsTail(path)
    assert tail.read_new() == [{"_step": 1, "loss": 1.5}]
    assert tail.read_new() == []
    append(path, 'ss": 1.4}\n')
    assert tail.read_new() == [{"_step": 2, "loss": 1.4}]
    assert tail.skipped == 0


def test_tail_skips_and_counts_malformed_lines(tmp_path):
    path = tmp_path / "agent_metrics.jsonl"
    path.write_bytes(
        b'{"loss": 1}\nnot json\n[1, 2]\n"text"\n\n\xff\xfe\n{"loss": NaN}\n{"loss": 2}\n'
    )
    tail = MetricsTail(path)
    new = tail.read_new()
    assert [row["loss"] for row in new if not math.isnan(row["loss"])] == [1, 2]
    assert math.isnan(new[1]["loss"])
    assert tail.skipped == 4  # not json, a list, a string, undecodable bytes (blank is ignored)


def test_tail_restarts_after_truncation(tmp_path):
    path = tmp_path / "agent_metrics.jsonl"
    path.write_text('{"loss": 1}\n{"loss": 2}\n')
    tail = MetricsTail(path)
    assert len(tail.read_new()) == 2
    path.write_text('{"loss": 9}\n')  # truncated and rewritten in place, shorter
    assert tail.read_new() == [{"loss": 9}]


def test_tail_restarts_after_rotation_to_a_new_file(tmp_path):
    path = tmp_path / "agent_metrics.jsonl"
    path.write_text('{"loss": 1}\n')
    tail = MetricsTail(path)
    assert tail.read_new() == [{"loss": 1}]
    keep_inode_busy = path.rename(tmp_path / "old.jsonl")  # so the new file gets a new inode
    path.write_text('{"loss": 7}\n{"loss": 8}\n')  # longer than the offset: size cannot tell
    assert tail.read_new() == [{"loss": 7}, {"loss": 8}]
    assert keep_inode_busy.exists()


# loss_of


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ({"loss": 1.5}, 1.5),
        ({"loss": 2}, 2.0),
        ({"train/loss": 0.5, "train_loss": 9}, 0.5),
        ({"train_loss": 0.25}, 0.25),
        ({"training_loss": 0.75}, 0.75),
        ({"loss": True, "train_loss": 0.3}, 0.3),
        ({"loss": "nan", "training_loss": 0.1}, 0.1),
        ({"loss": None}, None),
        ({"accuracy": 0.9}, None),
        ({}, None),
    ],
)
def test_loss_of(row, expected):
    assert loss_of(row) == expected


def test_loss_of_nan_and_inf_from_json():
    assert math.isnan(loss_of(json.loads('{"loss": NaN}')))
    assert loss_of(json.loads('{"loss": -Infinity}')) == -math.inf


# LossAnomalyDetector


def test_spike_after_three_steady_points():
    anomalies = LossAnomalyDetector(clock=FakeClock()).check(rows(1, 1, 1, 3.5))
    assert len(anomalies) == 1
    spike = anomalies[0]
    assert (spike.severity, spike.signature, spike.step, spike.loss) == (
        "warning",
        "loss_spike",
        3,
        3.5,
    )
    assert spike.message == "Loss spike detected (loss=3.5000, rolling_avg=1.0000)."


def test_no_spike_before_min_points():
    assert LossAnomalyDetector(clock=FakeClock()).check(rows(1, 1, 3.5)) == []


def test_nan_is_critical():
    anomalies = LossAnomalyDetector(clock=FakeClock()).check(rows(1.0, math.nan))
    assert [(a.severity, a.signature, a.message) for a in anomalies] == [
        ("critical", "nan_loss", "NaN loss detected (step=1).")
    ]


def test_inf_is_critical():
    anomalies = LossAnomalyDetector(clock=FakeClock()).check([{"_step": 4, "loss": math.inf}])
    assert [(a.severity, a.signature, a.message) for a in anomalies] == [
        ("critical", "inf_loss", "Inf loss detected (step=4).")
    ]


def test_high_loss_is_a_warning():
    anomalies = LossAnomalyDetector(clock=FakeClock()).check([{"_step": 7, "loss": 9.0}])
    assert [(a.severity, a.signature, a.message) for a in anomalies] == [
        (
            "warning",
            "high_loss",
            "High loss detected (step=7, loss=9.0000, threshold=8.0).",
        )
    ]


def test_high_loss_that_is_also_a_spike_is_reported_once_as_high_loss():
    anomalies = LossAnomalyDetector(clock=FakeClock()).check(rows(1, 1, 1, 9.0))
    assert [a.signature for a in anomalies] == ["high_loss"]


def test_same_batch_again_within_the_quiet_window_reports_nothing():
    clock = FakeClock()
    detector = LossAnomalyDetector(clock=clock)
    batch = rows(1.0, math.nan, 9.0)
    assert [a.signature for a in detector.check(batch)] == ["nan_loss", "high_loss"]
    clock.now += 179
    assert detector.check(batch) == []
    clock.now += 2  # 181 s after the first report
    assert [a.signature for a in detector.check(batch)] == ["nan_loss", "high_loss"]


def test_spike_is_reported_again_only_after_the_quiet_window():
    clock = FakeClock()
    detector = LossAnomalyDetector(clock=clock)
    assert len(detector.check(rows(1, 1, 1, 3.5))) == 1
    steady_then_spike = rows(*([1] * 20), 3.5)
    clock.now += 60
    assert detector.check(steady_then_spike) == []
    clock.now += 180
    assert [a.signature for a in detector.check(steady_then_spike)] == ["loss_spike"]


def test_spike_window_spans_batches():
    detector = LossAnomalyDetector(clock=FakeClock())
    assert detector.check(rows(1, 1)) == []
    assert detector.check(rows(1)) == []
    anomalies = detector.check(rows(3.5))
    assert [a.signature for a in anomalies] == ["loss_spike"]


def test_nan_does_not_enter_the_window():
    detector = LossAnomalyDetector(clock=FakeClock())
    detector.check(rows(1, 1, math.nan, 1))
    anomalies = detector.check(rows(3.5))
    assert [a.message for a in anomalies] == [
        "Loss spike detected (loss=3.5000, rolling_avg=1.0000)."
    ]


def test_window_keeps_only_the_latest_points():
    detector = LossAnomalyDetector(AnomalyThresholds(window=3), clock=FakeClock())
    detector.check(rows(2, 2, 2, 0.5, 0.5, 0.5))  # 2, 2, 2 slid out
    assert [a.signature for a in detector.check(rows(1.6))] == ["loss_spike"]


def test_negative_losses_do_not_spike():
    detector = LossAnomalyDetector(clock=FakeClock())
    assert detector.check(rows(-5, -5, -5, -1, 0, 2)) == []


def test_rows_without_a_loss_are_ignored():
    detector = LossAnomalyDetector(clock=FakeClock())
    assert detector.check([{"_step": 1, "accuracy": 0.1}, {"loss": "nan"}]) == []


def test_thresholds_are_configurable_and_checked():
    detector = LossAnomalyDetector(
        AnomalyThresholds(high_loss=2.5, spike_factor=10, min_points=1), clock=FakeClock()
    )
    assert [a.message for a in detector.check(rows(1, 3))] == [
        "High loss detected (step=1, loss=3.0000, threshold=2.5)."
    ]
    with pytest.raises(ValueError, match="window"):
        AnomalyThresholds(window=0)
    with pytest.raises(ValueError, match="spike_factor"):
        AnomalyThresholds(spike_factor=-1)
    with pytest.raises(ValueError, match="quiet_seconds"):
        AnomalyThresholds(quiet_seconds=-1)


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"thresholds": {"window": 0}}, "window"),
        ({"thresholds": {"spike": 2}}, "spike"),
        ({"thresholds": "tight"}, "thresholds"),
        ({"max_retries": "many"}, "max_retries"),
        ({"max_retries": -1}, "max_retries"),
        ({"retry_base_delay": None}, "retry_base_delay"),
        ({"retry_base_delay": float("nan")}, "base_delay"),
    ],
)
def test_bad_executor_options_are_refused_naming_the_option(config, named):
    from agentsys.agents.executor_options import BadExecutorOptions, options_from

    with pytest.raises(BadExecutorOptions, match=named):
        options_from(config)


def test_executor_options_set_the_retry_policy_and_thresholds():
    from agentsys.agents.executor_options import options_from

    policy, thresholds = options_from(
        {"max_retries": 1, "retry_base_delay": 0.5, "thresholds": {"high_loss": 4}}
    )
    assert (policy.max_retries, policy.base_delay, thresholds.high_loss) == (1, 0.5, 4)
    policy, thresholds = options_from({})
    assert (policy.max_retries, thresholds.high_loss) == (3, 8.0)  # the documented defaults


def test_tail_and_detector_together(tmp_path):
    path = tmp_path / "agent_metrics.jsonl"
    tail = MetricsTail(path)
    detector = LossAnomalyDetector(clock=FakeClock())
    append(path, "".join(json.dumps(row) + "\n" for row in rows(1, 1)))
    assert detector.check(tail.read_new()) == []
    append(path, json.dumps({"_step": 2, "loss": 1}) + "\n" + '{"_step": 3, "loss": NaN}\n')
    assert [a.signature for a in detector.check(tail.read_new())] == ["nan_loss"]


def test_a_diverged_loss_is_critical_and_its_message_short():
    detector = LossAnomalyDetector(clock=FakeClock())
    anomalies = detector.check([{"_step": 90, "loss": 1e305}, {"_step": 91, "loss": 2.5e7}])
    assert [(a.severity, a.signature, a.message) for a in anomalies] == [
        (
            "critical",
            "diverged_loss",
            "Loss diverged (step=90, loss=1e+305): the training has blown up.",
        ),
        ("warning", "high_loss", "High loss detected (step=91, loss=2.5e+07, threshold=8.0)."),
    ]
