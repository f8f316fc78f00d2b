"""What the research model reads about experiments and about the loop so far (issue 10 items
7 and 9): log tails, the results section and struggle warnings."""

from agentsys.research.results import (
    RESULTS_BUDGET_CHARS,
    ExperimentResult,
    format_history,
    format_results,
    read_log_tail,
)
from agentsys.research.struggle import detect_struggle


def test_the_log_tail_keeps_the_last_whole_lines(tmp_path):
    path = tmp_path / "run.log"
    path.write_text("".join(f"line {i}\n" for i in range(1000)))
    tail = read_log_tail(path, max_lines=5)
    assert tail.splitlines() == [f"line {i}" for i in range(995, 1000)]
    assert read_log_tail(tmp_path / "none.log") == ""


def test_the_results_section_has_its_fixed_shape():
    result = ExperimentResult(
        goal="lr 0.1",
        run_id="executor-ab12",
        command="python train.py",
        parameters={"seed": 1, "lr": 0.1},
        gpu_required=1,
        status="done",
        exit_code=0,
        log_tail="step 10\ndone",
        metrics={
            "loss": {
                "first": 4,
                "last": 0.0101234,
                "min": 0.01,
                "max": 4.2,
                "points": 20,
                "last_step": 200,
            }
        },
        alerts=[],
    )
    failed = ExperimentResult(
        goal="bad",
        run_id="",
        command="false",
        status="not started",
        error="workdir '../x' is outside the project directory",
    )
    text = format_results([result, failed])
    assert text.startswith("## Results from Previous Experiments\n\n### Experiment 1: lr 0.1\n")
    assert '- parameters: {"lr": 0.1, "seed": 1}' in text
    assert "- status: done (exit code 0)" in text
    assert "- metrics: loss last=0.01012 min=0.01 max=4.2 points=20 last_step=200" in text
    assert "- alerts: none" in text and "    step 10\n    done" in text
    assert "### Experiment 2: bad" in text and "not started: workdir '../x' is outside" in text


def test_the_history_has_one_line_per_step():
    text = format_history(
        [
            {"phase": "plan", "iteration": 0, "summary": "two runs"},
            {
                "phase": "iteration",
                "iteration": 1,
                "promise": None,
                "summary": "ran",
                "files_changed": ["a.py"],
                "runs": ["x", "y"],
                "errors": [],
            },
            {"phase": "iteration", "iteration": 2, "promise": "DONE", "summary": "best lr"},
            {"phase": "reflection", "iteration": 2, "summary": "learned"},
        ]
    )
    assert text.splitlines() == [
        "Plan: two runs",
        "Iteration 1 [-]: ran (files: 1, runs: 2, errors: 0)",
        "Iteration 2 [DONE]: best lr (files: 0, runs: 0, errors: 0)",
        "Reflection after iteration 2: learned",
    ]
    assert format_history([]) == "No iterations yet."


def _step(files=(), runs=(), duration=60.0, errors=()):
    return {
        "files_changed": list(files),
        "runs": list(runs),
        "duration_s": duration,
        "errors": list(errors),
    }


def test_a_healthy_loop_gets_no_warning():
    assert detect_struggle([_step(files=["a"]), _step(runs=["r"])]) == (0, 0, "")


def test_three_iterations_without_progress_warn():
    streak, _, warning = detect_struggle([_step(files=["a"]), _step(), _step(), _step()])
    assert streak == 3 and "last 3 iterations changed no files" in warning


def test_three_short_iterations_warn():
    _, shorts, warning = detect_struggle([_step(files=["a"], duration=5)] * 3)
    assert shorts == 3 and "under 30 s" in warning


def test_a_repeating_error_warns():
    error = "model: timed out"
    _, _, warning = detect_struggle([_step(runs=["r"], errors=[error])] * 2)
    assert "same error came back" in warning and error in warning


def test_multi_line_values_stay_on_their_line_of_the_section():
    result = ExperimentResult(
        goal="two\nlines",
        run_id="executor-1",
        command="python prep.py\npython train.py",
        parameters={"when": object()},
        status="failed",
        exit_code=1,
        error="Traceback\n  boom",
        alerts=["loss\nspiked"],
    )
    lines = format_results([result]).splitlines()
    assert "### Experiment 1: two lines" in lines
    assert "- command: `python prep.py\\npython train.py`" in lines
    assert "- status: failed (exit code 1): Traceback boom" in lines
    assert "- alerts: loss spiked" in lines
    assert any(line.startswith('- parameters: {"when": "<object') for line in lines)
    assert lines[-1] == "    (empty)"


def test_the_history_skips_junk_and_shows_a_missing_summary_as_empty():
    text = format_history([{"phase": "iteration", "iteration": 1, "summary": None}, "junk"])
    assert text == "Iteration 1 [-]:  (files: 0, runs: 0, errors: 0)"


def _noisy(number: int) -> ExperimentResult:
    log = "\n".join(f"step {i} loss {1 / (i + 1):.4f} " + "." * 200 for i in range(30))
    return ExperimentResult(
        goal=f"run {number}", run_id=f"r{number}", command="python t.py", log_tail=log
    )


def test_the_results_section_fits_its_budget_however_many_runs_ended_and_says_so():
    few = format_results([_noisy(1), _noisy(2)])
    assert len(few) <= RESULTS_BUDGET_CHARS
    assert "step 29 loss" in few  # the end of each log is what is kept
    assert "Log tails were shortened to keep this section under 12000 characters" in few
    many = format_results([_noisy(n) for n in range(300)])
    assert len(many) <= RESULTS_BUDGET_CHARS
    assert "more experiments ended but are not shown" in many
    assert "### Experiment 1: run 0" in many
    # short results are left whole and say nothing about a budget
    text = format_results([ExperimentResult(goal="g", run_id="r", command="c", log_tail="ok")])
    assert "    ok" in text and "budget" not in text and "shortened" not in text
