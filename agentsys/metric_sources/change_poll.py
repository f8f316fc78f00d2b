"""The change watch's fallback where inotify cannot see the writes (a network filesystem, a
SLURM run on another node, no inotify): a stat of the watched files, compared with the last.

Cheap on NFS, where each stat is a round trip: every poll stats the files sources name (a
run's agent_metrics.jsonl, its log) and the files seen changing lately (the event file or
MLflow metric file a script appends to); the recursive places (a workdir's TensorBoard
logdirs, mlruns) are walked every WALK_EVERY polls only, to find new files."""

from __future__ import annotations

import os

from agentsys.metric_sources.watched_places import Places

WALK_EVERY = 5  # polls: with POLL_SECONDS 0.2, a new file is seen within a second
HOT_POLLS = 50  # a file unchanged for this many polls is left to the walks again

Stat = tuple[int, int, int]  # size, mtime_ns, inode


class FilePoll:
    def __init__(self, places: Places):
        self.places = places
        self._seen: dict[str, Stat] | None = None  # None: no baseline yet
        self._hot: dict[str, int] = {}  # path -> the poll it last changed at
        self._polls = 0

    def check(self) -> tuple[bool, bool]:
        """(something changed, a file was made) since the last call; blocking (a thread)."""
        walk = self._polls % WALK_EVERY == 0
        self._polls += 1
        paths = set(self.places.files(walk))
        if not walk:  # of the hot files, those a source still reads (places may narrow)
            paths |= {path for path in self._hot if self.places.matters(path, False)[0]}
        now = _stats(paths)
        seen, self._seen = self._seen, now if walk else {**(self._seen or {}), **now}
        if seen is None:
            return False, False
        changed = {path for path, stat in now.items() if seen.get(path) != stat}
        gone = {path for path in paths if path in seen and path not in now}
        if walk:
            gone |= seen.keys() - now.keys()
        for path in gone:
            self._seen.pop(path, None)
        gone = {path for path in gone if self.places.matters(path, False)[0]}  # not dropped
        for path in changed:
            self._hot[path] = self._polls
        for path in [p for p, at in self._hot.items() if self._polls - at > HOT_POLLS]:
            del self._hot[path]
        new = any(path not in seen for path in changed)
        return bool(changed or gone), new


def _stats(paths: set[str]) -> dict[str, Stat]:
    found = {}
    for path in paths:
        try:
            stat = os.stat(path)
        except OSError:
            continue
        found[path] = (stat.st_size, stat.st_mtime_ns, stat.st_ino)
    return found
