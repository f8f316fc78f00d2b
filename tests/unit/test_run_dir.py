"""agentsys.run_dir: the layout of a run's and a research loop's directories, and the job.pid
and job.done files that the executor, `serve` and `manage.py runs` all read."""

from pathlib import Path

import pytest

from agentsys.run_dir import (
    EXIT_CODE_FILE,
    PID_FILE,
    TERMINATED_CODE,
    loop_dir_of,
    read_exit_code,
    read_pid_file,
    record_terminated,
    run_dir_of,
    write_pid_file,
)


def test_the_directories_are_where_the_tools_and_the_docs_expect_them():
    assert run_dir_of("/w", "executor-1") == Path("/w/.agents/runs/executor-1")
    assert loop_dir_of(Path("/w"), "research-1") == Path("/w/.agents/wild/research-1")


def test_a_pid_file_reads_back_what_was_written(tmp_path):
    write_pid_file(tmp_path, 4242, "987654")
    assert (tmp_path / PID_FILE).read_text() == "4242 987654"  # the format on disk
    assert read_pid_file(tmp_path) == (4242, "987654")


def test_a_pid_file_without_a_start_time_reads_with_an_empty_one(tmp_path):
    write_pid_file(tmp_path, 4242, "")
    assert read_pid_file(tmp_path) == (4242, "")


@pytest.mark.parametrize("text", ["", "   ", "abc 123", "12.5 7"])
def test_a_pid_file_that_names_no_pid_reads_as_none(tmp_path, text):
    (tmp_path / PID_FILE).write_text(text)
    assert read_pid_file(tmp_path) is None


def test_a_missing_pid_file_reads_as_none(tmp_path):
    assert read_pid_file(tmp_path) is None


def test_the_exit_code_is_what_the_wrapper_wrote(tmp_path):
    (tmp_path / EXIT_CODE_FILE).write_text("3\n")
    assert read_exit_code(tmp_path) == 3


@pytest.mark.parametrize("text", ["", "done\n", "1.0\n"])
def test_an_exit_code_file_that_holds_no_code_reads_as_none(tmp_path, text):
    (tmp_path / EXIT_CODE_FILE).write_text(text)
    assert read_exit_code(tmp_path) is None


def test_a_run_that_has_not_ended_has_no_exit_code(tmp_path):
    assert read_exit_code(tmp_path) is None


def test_a_stop_records_terminated_unless_the_run_recorded_its_own_code(tmp_path):
    record_terminated(tmp_path)
    assert read_exit_code(tmp_path) == TERMINATED_CODE == 143
    (tmp_path / EXIT_CODE_FILE).write_text("0\n")
    record_terminated(tmp_path)
    assert read_exit_code(tmp_path) == 0
