"""Online tracker runs found in what a script prints: the links a person follows from the run
page to the W&B or MLflow run that holds its points."""

from agentsys.tracker_links import SCAN_BYTES, find_tracker_urls, tracker_urls_in_log

WANDB = "wandb: 🚀 View run sgd-lr0.1 at: https://wandb.ai/ada/mnist/runs/abc123"
WANDB_PROJECT = "wandb: ⭐️ View project at: https://wandb.ai/ada/mnist"
MLFLOW = "🏃 View run bright-owl-42 at: http://mlflow.lab:5000/#/experiments/1/runs/9f2e"


def test_the_wandb_and_mlflow_run_lines_give_their_links():
    text = "\n".join(["epoch 1", WANDB, WANDB_PROJECT, MLFLOW, "done"])
    assert find_tracker_urls(text) == {
        "wandb": "https://wandb.ai/ada/mnist/runs/abc123",
        "mlflow": "http://mlflow.lab:5000/#/experiments/1/runs/9f2e",
    }


def test_colour_codes_around_the_link_are_removed():
    styled = "wandb: View run x at: \x1b[34m\x1b[4mhttps://wandb.ai/a/p/runs/r1\x1b[0m"
    assert find_tracker_urls(styled) == {"wandb": "https://wandb.ai/a/p/runs/r1"}


def test_the_last_link_of_a_tracker_wins_and_lines_that_only_mention_runs_are_not_links():
    text = "\n".join(
        [
            "wandb: View run a at: https://wandb.ai/x/p/runs/first",
            "View run summary at the end of training",  # no URL
            "see javascript:alert(1) at: javascript:alert(1)",  # not http(s)
            "wandb: View run a at: https://wandb.ai/x/p/runs/second",
        ]
    )
    assert find_tracker_urls(text) == {"wandb": "https://wandb.ai/x/p/runs/second"}


def test_only_the_head_and_tail_of_a_big_log_are_read(tmp_path):
    log = tmp_path / "run.log"
    middle = "wandb: View run m at: https://wandb.ai/x/p/runs/middle\n"
    with log.open("w") as handle:
        handle.write(WANDB + "\n")
        handle.write("x" * (3 * SCAN_BYTES) + "\n" + middle + "y" * (3 * SCAN_BYTES) + "\n")
        handle.write(MLFLOW + "\n")
    found = tracker_urls_in_log(log)
    assert found["wandb"].endswith("/abc123") and found["mlflow"].endswith("/9f2e")
    assert tracker_urls_in_log(tmp_path / "missing.log") == {}
