"""Runs sharing a workdir keep their own TensorBoard files (agentsys.metric_sources.ownership)."""

import os
import subprocess
import sys
import time

from agentsys.metric_sources.ownership import event_file_owner


def _run_dir(workdir, name, started, leader=1):
    run_dir = workdir / ".agents" / "runs" / name
    run_dir.mkdir(parents=True)
    (run_dir / "job.pid").write_text(f"{leader} 0")
    os.utime(run_dir / "job.pid", (started, started))
    return run_dir


def test_without_a_pid_a_file_is_the_latest_run_started_before_it(tmp_path):
    now = time.time()
    first = _run_dir(tmp_path, "executor-a", now - 100)
    second = _run_dir(tmp_path, "executor-b", now - 50)
    early, late = (tmp_path / f"events.out.tfevents.{int(t)}.host" for t in (now - 80, now - 10))
    assert event_file_owner(first)(early) and not event_file_owner(second)(early)
    assert event_file_owner(second)(late) and not event_file_owner(first)(late)
    older = tmp_path / f"events.out.tfevents.{int(now - 500)}.host"  # before any run
    assert not event_file_owner(first)(older)
    assert not event_file_owner(first)(tmp_path / "events.out.tfevents.garbage")


def test_a_live_writer_decides_by_its_process_session(tmp_path):
    writer = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True
    )
    try:
        now = time.time()
        ours = _run_dir(tmp_path, "executor-a", now - 100, leader=writer.pid)
        theirs = _run_dir(tmp_path, "executor-b", now - 50, leader=os.getpid())
        name = tmp_path / f"events.out.tfevents.{int(now)}.host.example.{writer.pid}.0"
        # The time rule alone would give it to the later run; the writer's session says ours.
        assert event_file_owner(ours)(name) and not event_file_owner(theirs)(name)
    finally:
        writer.kill()
        writer.wait()


def test_a_file_without_a_pid_is_the_run_whose_process_holds_it_open(tmp_path):
    """tensorboardX names its files without a pid; two runs started together in one workdir
    (a research loop's brackets): the time alone would give the file to the later run."""
    now = time.time()
    name = tmp_path / f"events.out.tfevents.{int(now)}.host"
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import time; f = open({str(name)!r}, 'ab'); print('open', flush=True); "
            "time.sleep(30)",
        ],
        start_new_session=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout.readline().strip() == "open"
        ours = _run_dir(tmp_path, "executor-a", now - 10, leader=writer.pid)
        later = _run_dir(tmp_path, "executor-b", now - 5, leader=os.getpid())
        owned_by_later = event_file_owner(later)
        assert event_file_owner(ours)(name) and not owned_by_later(name)
    finally:
        writer.kill()
        writer.wait()
    # The writer gone, the later run's next look still leaves the file to the run that wrote it.
    assert not owned_by_later(name)


def test_a_hparams_sub_run_written_as_the_script_ends_stays_with_its_writers_run(tmp_path):
    """add_hparams writes `<logdir>/<time.time()>/events...` as a sweep's run ends, after a
    sibling started: the time rule alone would hand the sibling the run's hparams."""
    now = time.time()
    ours = _run_dir(tmp_path, "executor-a", now - 100)
    sibling = _run_dir(tmp_path, "executor-b", now - 50)
    logdir = tmp_path / "runs" / "exp"
    (logdir / f"{now - 10:.6f}").mkdir(parents=True)
    main = logdir / f"events.out.tfevents.{int(now - 90)}.host"
    sub_run = logdir / f"{now - 10:.6f}" / f"events.out.tfevents.{int(now - 10)}.host"
    for path in (main, sub_run):
        path.write_bytes(b"")
    assert event_file_owner(ours)(main) and not event_file_owner(sibling)(main)
    assert event_file_owner(ours)(sub_run) and not event_file_owner(sibling)(sub_run)
    # A folder that is not a sub-run's name gets no such reading: the time rule decides.
    other = logdir / "eval" / f"events.out.tfevents.{int(now - 10)}.host"
    other.parent.mkdir()
    other.write_bytes(b"")
    assert event_file_owner(sibling)(other) and not event_file_owner(ours)(other)
