"""A run's metric files watched for change, so its executor looks at them when they change
rather than on a timer (issue 39: a stop rule's latency was the timer's, 1 s to 3 s).

Linux inotify on the folders the sources read (agentsys.metric_sources.watched_places),
through one fd runagentd's event loop reads (add_reader): no thread a run. Folders made later
(a TensorBoard logdir, mlruns/<exp>/<run>/metrics) are watched once made, and a change is
flagged then too, since their first files may predate the watch. Where inotify is missing, or
the run's files lie on a network filesystem (a SLURM run on another node writes through NFS,
which inotify does not see), the files are stat'ed every POLL_SECONDS instead
(agentsys.metric_sources.change_poll).

`next_look` is what the executor's monitor loop awaits between looks: a change, or the
timer's backstop (a wall_seconds rule, the trackers' params change no file we watch). Looks
are at least MIN_GAP apart, so a script writing 1,000 rows/s costs a bounded number; a change
during a look is flagged again, and makes the next one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from pathlib import Path

from agentsys import inotify
from agentsys.metric_sources.base import Watched
from agentsys.metric_sources.change_poll import FilePoll
from agentsys.metric_sources.watched_places import Places, on_network_filesystem

logger = logging.getLogger(__name__)

MIN_GAP = 0.15  # seconds between two looks at most: the debounce
# A run with no stop rule is looked at for its charts and alerts only: once a second at most,
# what a look costs (~1 ms of CPU, a store) is paid that often however fast the script writes.
CHART_GAP = 1.0
POLL_SECONDS = 0.2  # how often the fallback stats the watched files
# "timer" (looks on the timer only: the bench's before), "poll" or "" (inotify where it works)
MODE_VARIABLE = "AGENTSYS_METRICS_WATCH"


def watch_mode(*, remote: bool) -> str:
    """How a run's files are watched: "timer", "poll", or "auto" (inotify, unless they lie on
    a network filesystem: `start` finds out, off the event loop)."""
    forced = os.environ.get(MODE_VARIABLE, "").strip().lower()
    if forced in ("timer", "poll"):
        return forced
    return "poll" if remote or not inotify.available() else "auto"


def change_watch_for(watched: list[Watched], *, backend: str, stop_rules: bool):
    """The executor's watch on its run's metric files; None when it looks on the timer only
    (forced, or a backend that runs no command)."""
    if backend not in ("subprocess", "slurm"):
        return None
    # A SLURM run's files are written on another node: polled, as inotify misses them.
    mode = watch_mode(remote=backend == "slurm")
    if mode == "timer":
        return None
    return ChangeWatch(watched, poll=mode == "poll", min_gap=MIN_GAP if stop_rules else CHART_GAP)


class ChangeWatch:
    def __init__(self, watched: list[Watched], *, poll: bool = False, min_gap: float = MIN_GAP):
        self._watched = list(watched)
        self.places = Places(self._watched)
        self._file_poll: FilePoll | None = None
        self.min_gap = min_gap
        self.poll = poll
        self._changed = asyncio.Event()
        self._new_files = False
        self._last_look = time.monotonic()
        self._started = False
        self._closed = False
        self._inotify: inotify.Inotify | None = None
        self._fd_lock = threading.Lock()  # the fd is closed only when no arranging uses it
        self._wds: dict[int, str] = {}  # watch descriptor -> its folder
        self._arranging: asyncio.Task | None = None
        self._arrange_again = False
        self._poller: asyncio.Task | None = None
        self._armed = asyncio.Event()  # the first watches added, or the first poll's baseline

    async def start(self) -> None:
        if self._started or self._closed:
            return
        self._started = True
        if not self.poll:
            roots = [Path(root) for root, _place in self.places.places]
            self.poll = await asyncio.to_thread(lambda: any(map(on_network_filesystem, roots)))
        if not self.poll:
            try:
                self._inotify = inotify.Inotify()
            except OSError as error:
                logger.info("no inotify (%s): metric files are polled", error)
                self.poll = True
        if self.poll:
            self._poller = asyncio.create_task(self._poll_loop(), name="metric-files-poll")
            return
        asyncio.get_running_loop().add_reader(self._inotify.fd, self._on_readable)
        self._rearrange()

    async def next_look(self, backstop: float) -> bool:
        """Return when the next look is due: a change (at least min_gap after the last look)
        or `backstop` seconds after the last look. True when a change woke it."""
        await self.start()
        gap = self._last_look + self.min_gap - time.monotonic()
        if gap > 0:
            await asyncio.sleep(gap)
        remaining = self._last_look + backstop - time.monotonic()
        woken = self._changed.is_set()
        if not woken and remaining > 0:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self._changed.wait()
            woken = self._changed.is_set()
        self._changed.clear()  # before the look: a change during it makes the next one
        self._last_look = time.monotonic()
        return woken

    def watch(self, watched: list[Watched]) -> None:
        """Watch these places from now on (a source no longer read, printed lines once a
        structured source has rows, stops waking looks: a tqdm bar would, ten times a second)."""
        if watched == self._watched:
            return
        self._watched = list(watched)
        self.places = Places(self._watched)
        if self._file_poll is not None:
            self._file_poll.places = self.places
        if self._inotify is not None:
            self._rearrange()  # a folder dropped stays watched: its events no longer matter

    async def armed(self) -> None:
        """Wait until a change would be seen (tests and the bench: one made before is not
        a change the watch could have missed, but a look a start always gets)."""
        await self.start()
        await self._armed.wait()
        while self._arranging is not None and not self._arranging.done():
            await asyncio.wait([self._arranging])

    def take_new_files(self) -> bool:
        """Whether a file or folder was made since the last call (a source that finds its
        files by walking should walk now)."""
        new, self._new_files = self._new_files, False
        return new

    async def close(self) -> None:
        self._closed = True
        for task in (self._poller, self._arranging):
            if task is not None:
                task.cancel()
        watcher, self._inotify = self._inotify, None
        if watcher is None:
            return
        with contextlib.suppress(Exception):  # the loop may be closing
            asyncio.get_running_loop().remove_reader(watcher.fd)
        await asyncio.to_thread(self._close_fd, watcher)

    def _close_fd(self, watcher: inotify.Inotify) -> None:
        with self._fd_lock:  # an arranging thread may still add watches on it
            watcher.close()

    # -- inotify -------------------------------------------------------------------------

    def _on_readable(self) -> None:
        watcher = self._inotify
        if watcher is None:
            return
        try:
            events = watcher.read()
        except OSError:
            logger.warning("reading inotify failed; the timer stays", exc_info=True)
            return
        for event in events:
            self._note(event)

    def _note(self, event: inotify.Event) -> None:
        if event.mask & inotify.IN_Q_OVERFLOW:  # events were lost: any might have mattered
            self._flag(new_files=True)
            self._rearrange()
            return
        folder = self._wds.get(event.wd)
        if event.mask & inotify.IN_IGNORED:
            self._wds.pop(event.wd, None)
            return
        if folder is None:  # a watch added as we read: count it as news
            self._flag(new_files=True)
            return
        if not event.name:
            return  # about the folder itself (deleted): its parent's watch says it
        made = event.mask & (inotify.IN_CREATE | inotify.IN_MOVED_TO)
        if self._changed.is_set() and not event.is_dir and (self._new_files or not made):
            return  # a look is due already: the common case at 1,000 rows/s
        look, rearrange = self.places.matters(f"{folder}/{event.name}", event.is_dir)
        if look:
            self._flag(new_files=bool(made))
        if rearrange:
            self._rearrange()

    def _flag(self, *, new_files: bool) -> None:
        self._new_files = self._new_files or new_files
        self._changed.set()

    def _rearrange(self) -> None:
        """Watch the folders of every place (in a thread: it walks them); one at a time, and
        once more when asked during one."""
        if self._arranging is not None and not self._arranging.done():
            self._arrange_again = True
            return
        self._arranging = asyncio.create_task(self._arrange_loop(), name="metric-files-watch")

    async def _arrange_loop(self) -> None:
        self._arrange_again = True
        while self._arrange_again and not self._closed:
            self._arrange_again = False
            watcher = self._inotify
            if watcher is None:
                return
            try:
                await asyncio.to_thread(self._add_watches, watcher)
            except Exception:  # a bug here must leave the timer working, not the run dead
                logger.exception("watching metric files failed; the timer stays")
                return
            # Files made in a folder before its watch was added were not seen.
            self._flag(new_files=True)
            self._armed.set()

    def _add_watches(self, watcher: inotify.Inotify) -> None:
        with self._fd_lock:
            if self._closed:
                return
            for folder in self.places.folders():
                try:
                    wd = watcher.add_watch(folder)
                except OSError as error:
                    if error.errno not in (2, 20):  # ENOENT, ENOTDIR: gone meanwhile
                        logger.info("not watching %s (%s): the timer covers it", folder, error)
                        if error.errno == 28:  # ENOSPC: the watch limit; more will fail too
                            return
                    continue
                self._wds[wd] = folder

    # -- polling -------------------------------------------------------------------------

    async def _poll_loop(self) -> None:
        poll = self._file_poll = FilePoll(self.places)
        while not self._closed:
            changed, new = await asyncio.to_thread(poll.check)
            if changed:
                self._flag(new_files=new)
            self._armed.set()  # the first check is the baseline
            await asyncio.sleep(POLL_SECONDS)
