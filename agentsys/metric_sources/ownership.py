"""Which TensorBoard event files under a shared working directory are this run's.

The runs of a sweep or a research loop share one workdir, and their scripts write event files
wherever they like (tensorboardX's `runs/<time>_<host>`, Lightning's `lightning_logs/version_N`),
so a run must not chart a sibling's curves. Writers name their files
`events.out.tfevents.<creation time>.<host>` (tensorboardX) or
`events.out.tfevents.<creation time>.<host>.<pid>.<n>` (TensorFlow, torch):

- with a pid whose process still lives, the file is ours exactly when that process is in our
  run's process session (the run's leader, in job.pid, leads the session of all it starts);
- else, while a live process has the file open (a writer keeps it open as it writes), the
  file is ours exactly when one of those processes is in our session;
- a hparams sub-run (tensorboardX's and torch's `add_hparams` write it into
  `<the writer's logdir>/<time.time()>/` as the script ends, and close it at once) is ours
  exactly when the writer's own file, the latest one in that logdir created before it, is:
  without this a sweep's run would lose its hparams to any sibling started after it;
- otherwise (the writer has exited: a run shorter than the watchdog's interval, the run's
  last read), the file is ours when it was created after our run started and no sibling run
  in the workdir started between our start and the file's creation.

A file created before this run started is never ours (an earlier run's, or the project's).
A decision made from a live writer is final. What is left unsure: of runs started together
in one workdir, a writer that names no pid and has exited before any of them looked goes to
the run started last before the file appeared.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from agentsys.proctree import process_info, sessions_holding
from agentsys.run_dir import PID_FILE, read_pid_file

# <time>.<host> then, from TensorFlow and torch, .<pid>.<n>; a host name may hold dots.
EVENT_FILE_NAME = re.compile(
    r"^events\.out\.tfevents\.(?P<created>\d+(?:\.\d+)?)\.(?P<host>.+?)"
    r"(?:\.(?P<pid>\d+)\.\d+)?(?:\.[^.]*)?$"
)
SUB_RUN_DIR = re.compile(r"^\d+\.\d+$")  # str(time.time()): add_hparams' sub-run folder
CLOCK_SLACK = 1.0  # seconds: the file's name and job.pid's mtime come from different clocks


def event_file_owner(run_dir: Path) -> Callable[[Path], bool]:
    """A predicate for TensorBoardSource: is this event file the run's?"""

    known: dict[Path, bool] = {}  # decided from a live writer: final either way

    def owns(path: Path) -> bool:
        if path in known:
            return known[path]
        named = EVENT_FILE_NAME.match(path.name)
        if named is None:
            return False  # not a writer's name: never guess
        created = float(named["created"])
        started = _started(run_dir)
        if started is None or created < started - CLOCK_SLACK:
            return False
        writer = process_info(int(named["pid"])) if named["pid"] else None
        leader = read_pid_file(run_dir)
        if writer is not None and leader is not None and writer.state != "Z":
            known[path] = writer.session == leader[0]
            return known[path]
        holders = sessions_holding(path)
        if holders and leader is not None:
            known[path] = leader[0] in holders
            return known[path]
        parent_file = _sub_run_parent(path, created)
        if parent_file is not None:
            return owns(parent_file)
        return not any(
            started < sibling_start <= created + CLOCK_SLACK
            for sibling_start in _sibling_starts(run_dir)
        )

    return owns


def _sub_run_parent(path: Path, created: float) -> Path | None:
    """For a file in an add_hparams sub-run folder: the event file of the writer that made
    it (the newest in the folder above created no later than it); None otherwise."""
    if SUB_RUN_DIR.match(path.parent.name) is None:
        return None
    newest: tuple[float, Path] | None = None
    try:
        candidates = list(path.parent.parent.iterdir())
    except OSError:
        return None
    for candidate in candidates:
        named = EVENT_FILE_NAME.match(candidate.name)
        if named is None or not candidate.is_file():
            continue
        candidate_created = float(named["created"])
        if candidate_created <= created + CLOCK_SLACK and (
            newest is None or candidate_created > newest[0]
        ):
            newest = (candidate_created, candidate)
    return None if newest is None else newest[1]


def _started(run_dir: Path) -> float | None:
    try:
        return (run_dir / PID_FILE).stat().st_mtime
    except OSError:
        return None


def _sibling_starts(run_dir: Path) -> list[float]:
    starts = []
    try:
        siblings = [path for path in run_dir.parent.iterdir() if path != run_dir]
    except OSError:
        return starts
    for sibling in siblings:
        started = _started(sibling)
        if started is not None:
            starts.append(started)
    return starts
