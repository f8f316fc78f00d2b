"""Struggle detection (issue 10 item 9): the warning the next prompt carries when the loop is
stuck, and that it goes away once the loop recovers."""

from agentsys.research.struggle import detect_struggle


def _step(files=(), runs=(), duration=60.0, errors=()):
    return {
        "files_changed": list(files),
        "runs": list(runs),
        "duration_s": duration,
        "errors": list(errors),
    }


def test_no_history_no_warning():
    assert detect_struggle([]) == (0, 0, "")


def test_two_idle_iterations_are_not_yet_a_streak():
    streak, _, warning = detect_struggle([_step(), _step()])
    assert streak == 2 and warning == ""


def test_progress_resets_the_no_progress_streak():
    history = [_step(), _step(), _step(), _step(runs=["executor-1"]), _step()]
    streak, _, warning = detect_struggle(history)
    assert streak == 1 and warning == ""


def test_short_iterations_count_only_while_they_last():
    quick = [_step(files=["a"], duration=3)] * 4
    assert detect_struggle(quick)[1] == 4
    recovered = [*quick, _step(files=["a"], duration=120)]
    assert detect_struggle(recovered)[1:] == (0, "")


def test_an_unknown_duration_is_not_called_short():
    odd = [_step(files=["a"], duration=d) for d in (None, "soon", float("nan"))]
    assert detect_struggle(odd)[1:] == (0, "")


def test_one_error_is_not_a_repeat_and_different_errors_are_not_either():
    assert detect_struggle([_step(runs=["r"], errors=["boom"])])[2] == ""
    varied = [_step(runs=["r"], errors=["boom"]), _step(runs=["r"], errors=["bang"])]
    assert detect_struggle(varied)[2] == ""


def test_the_repeated_error_is_named_even_among_others_and_as_a_bare_string():
    history = [
        {**_step(runs=["r"]), "errors": "experiment 'a': failed"},
        _step(runs=["r"], errors=["new thing", "experiment 'a': failed"]),
    ]
    warning = detect_struggle(history)[2]
    assert warning.startswith("## Warning: the loop is struggling\n")
    assert "experiment 'a': failed" in warning and "new thing" not in warning


def test_all_signals_together_make_one_section_with_one_line_each():
    stuck = [_step(duration=2, errors=["same"])] * 3
    streak, shorts, warning = detect_struggle(stuck)
    assert (streak, shorts) == (3, 3)
    lines = warning.splitlines()
    assert lines[0] == "## Warning: the loop is struggling" and len(lines) == 4
    assert all(line.startswith("- ") for line in lines[1:])


def test_records_missing_keys_or_not_dicts_do_not_crash():
    streak, shorts, _ = detect_struggle([{}, "junk", {"errors": None}, {}])
    assert streak == 3 and shorts == 0
