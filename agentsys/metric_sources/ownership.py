"""Which TensorBoard event files under a shared working directory are this run's.

The runs of a sweep or a research loop share one workdir, and their scripts write event files
wherever they like (tensorboardX's `runs/<time>_<host>`, Lightning's `lightning_logs/version_N`),
so a run must not chart a sibling's curves. Writers name their files
`events.out.tfevents.<creation time>.<host>` (tensorboardX) or
`events.out.tfevents.<creation time>.<host>.<pid>.<n>` (TensorFlow, torch):

- with a pid whose process still lives, the file is ours exactly when that process is in our
  run's process session (the run's leader, in job.pid, leads the session of all it starts);
- otherwise (no pid in the name, or the writer has exited: a run shorter than the watchdog's
  interval, the run's last read), the file is ours when it was created after our run started
  and no sibling run in the workdir started between our start and the file's creation (of
  two runs writing at once without pids, the one started last takes the file).

A file created before this run started is never ours (an earlier run's, or the project's).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from agentsys.proctree import process_info
from agentsys.run_dir import PID_FILE, read_pid_file

# <time>.<host> then, from TensorFlow and torch, .<pid>.<n>; a host name may hold dots.
EVENT_FILE_NAME = re.compile(
    r"^events\.out\.tfevents\.(?P<created>\d+(?:\.\d+)?)\.(?P<host>.+?)"
    r"(?:\.(?P<pid>\d+)\.\d+)?(?:\.[^.]*)?$"
)
CLOCK_SLACK = 1.0  # seconds: the file's name and job.pid's mtime come from different clocks


def event_file_owner(run_dir: Path) -> Callable[[Path], bool]:
    """A predicate for TensorBoardSource: is this event file the run's?"""

    def owns(path: Path) -> bool:
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
            return writer.session == leader[0]
        return not any(
            started < sibling_start <= created + CLOCK_SLACK
            for sibling_start in _sibling_starts(run_dir)
        )

    return owns


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
