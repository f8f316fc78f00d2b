"""Where a run's metric sources read, as the change watch needs it: the folders to watch, which
change in them matters, and whether they can be watched at all (inotify sees only this
machine's writes: a SLURM run on another node writes through NFS, unseen)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from agentsys.metric_sources.base import Watched

# Filesystems whose writes may come from another machine: inotify would miss them.
NETWORK_FILESYSTEMS = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "ceph", "beegfs", "9p", "afs"}
)
MAX_FOLDERS = 2_000  # watched under one recursive place: a huge workdir falls back to the timer


class Places:
    """The merged places of every source, as strings (an event's path is tested once an
    event, up to a thousand times a second)."""

    def __init__(self, watched: list[Watched]):
        merged: dict[tuple[str, bool], Watched] = {}
        for place in watched:
            key = (os.path.abspath(place.path), place.recursive)
            old = merged.get(key)
            if old is not None and old.names is not None and place.names is not None:
                place = Watched(place.path, old.names | place.names, place.recursive, place.skip)
            elif old is not None:
                place = Watched(place.path, None, place.recursive, old.skip & place.skip)
            merged[key] = place
        self.places = [(root, place) for (root, _), place in merged.items()]

    def folders(self) -> Iterator[str]:
        """Every folder to watch now: each place, its subfolders where recursive, and for a
        place not made yet its nearest existing ancestor (to see it made)."""
        for root, place in self.places:
            if not os.path.isdir(root):
                ancestor = os.path.dirname(root)
                while ancestor != os.path.dirname(ancestor) and not os.path.isdir(ancestor):
                    ancestor = os.path.dirname(ancestor)
                yield ancestor
                continue
            yield root
            if place.recursive:
                yield from subfolders(root, place.skip)

    def matters(self, path: str, is_dir: bool) -> tuple[bool, bool]:
        """(a source may read this: look; a folder was made that should be watched)."""
        look = rearrange = False
        for root, place in self.places:
            if place.recursive:
                if path.startswith(root + "/"):
                    parts = path[len(root) + 1 :].split("/")
                    if not place.skip.intersection(parts):
                        look = True
                        rearrange = rearrange or is_dir
                    continue
            elif os.path.dirname(path) == root:
                if place.names is None or os.path.basename(path) in place.names:
                    look = True
                continue
            if is_dir and (root == path or root.startswith(path + "/")):
                rearrange = True  # on the way to a place not made yet
        return look, rearrange

    def files(self, walk: bool) -> Iterator[str]:
        """The files a poll stats: each named file; with `walk`, every file of the recursive
        places too (a bounded walk)."""
        for root, place in self.places:
            if place.names is not None and not place.recursive:
                yield from (os.path.join(root, name) for name in sorted(place.names))
            elif walk:
                for folder in [root, *subfolders(root, place.skip)] if place.recursive else [root]:
                    try:
                        with os.scandir(folder) as entries:
                            yield from (e.path for e in entries if not e.is_dir())
                    except OSError:
                        continue


def subfolders(root: str, skip: frozenset[str]) -> Iterator[str]:
    count = 0
    for folder, dirs, _names in os.walk(root, onerror=lambda _error: None):
        dirs[:] = [d for d in dirs if d not in skip]
        for name in dirs:
            count += 1
            if count > MAX_FOLDERS:
                return
            yield os.path.join(folder, name)


def on_network_filesystem(path: Path) -> bool:
    """Whether `path` lies on a filesystem other machines write (from /proc/self/mountinfo:
    its longest mount point's type); False where that cannot be told."""
    target = os.path.realpath(path)
    best, fstype = "", ""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as mounts:
            for line in mounts:
                fields = line.split()
                if "-" not in fields:
                    continue
                point = fields[4].replace("\\040", " ")
                inside = target == point or target.startswith(point.rstrip("/") + "/")
                if inside and len(point) > len(best):
                    best, fstype = point, fields[fields.index("-") + 1]
    except OSError:
        return False
    return fstype.split(".")[0] in NETWORK_FILESYSTEMS or fstype.startswith("fuse.sshfs")
