"""The workdir tools of the research-agent MCP server (issue 23, part 1): `quick_bash` and
`list_directory`, each confined to one workdir.

Plain Python, no Django; `agentsys.mcp.research_server` serves them over MCP.

- quick_bash never hangs: the command runs in a session of its own with an environment
  marker, and when it times out (or ends, leaving children behind) every process of that
  session and every process carrying the marker is killed (agentsys.proctree), so a child that
  left the session with setsid dies too. Its output is capped: the first OUTPUT_CAP bytes of
  each stream are returned, and the result says how many bytes there were.
- list_directory reads one directory (os.scandir, no subprocess), sorted and paged, and
  refuses any path that is not inside the workdir once resolved: `..`, an absolute path
  elsewhere, a symlink that leads out, a NUL byte, an over-long name.
"""

from __future__ import annotations

import asyncio
import os
import signal
import stat
from dataclasses import dataclass
from pathlib import Path

from agentsys.mcp import command_reaper
from agentsys.proctree import MARKER_VARIABLE, RunProcesses, process_info

OUTPUT_CAP = 64 * 1024  # bytes of stdout and of stderr returned
MAX_TIMEOUT_S = 120.0
MAX_COMMAND = 64 * 1024
MAX_PATH = 4096
MAX_NAME = 255
MAX_PAGE = 5000


class ToolRefused(ValueError):
    """The call cannot be carried out as asked; the message says why (an MCP tool error)."""


@dataclass(frozen=True)
class Workdir:
    root: Path

    @classmethod
    def at(cls, path: str | os.PathLike) -> Workdir:
        root = Path(path).resolve()
        if not root.is_dir():
            raise ToolRefused(f"workdir {root} is not a directory")
        return cls(root)

    def inside(self, path: str) -> Path:
        """`path` (relative to the workdir, or absolute inside it) resolved, symlinks
        followed; refused when it ends up anywhere else."""
        if not isinstance(path, str):
            raise ToolRefused(f"path must be a string, got {type(path).__name__}")
        if "\0" in path:
            raise ToolRefused("path contains a NUL byte")
        if len(path) > MAX_PATH:
            raise ToolRefused(f"path is {len(path)} characters long; at most {MAX_PATH}")
        too_long = [part for part in Path(path).parts if len(part.encode()) > MAX_NAME]
        if too_long:
            raise ToolRefused(f"a name in the path is over {MAX_NAME} bytes: {too_long[0][:40]}…")
        candidate = Path(path) if os.path.isabs(path) else self.root / path
        resolved = candidate.resolve()
        if resolved != self.root and not resolved.is_relative_to(self.root):
            raise ToolRefused(
                f"{path!r} is outside the workdir {self.root}"
                + (" (through a symlink)" if _has_symlink(candidate, self.root) else "")
            )
        return resolved


def _has_symlink(candidate: Path, root: Path) -> bool:
    try:
        return any(p.is_symlink() for p in [candidate, *candidate.parents] if p != root)
    except OSError:
        return False


# -- quick_bash ------------------------------------------------------------------------------


async def quick_bash(
    workdir: Workdir, command: str, subdir: str = ".", timeout_seconds: float = 30.0
) -> dict:
    if not isinstance(command, str) or not command.strip():
        raise ToolRefused("command must be a non-empty string")
    if len(command) > MAX_COMMAND:
        raise ToolRefused(f"command is {len(command)} characters; at most {MAX_COMMAND}")
    if "\0" in command:
        raise ToolRefused("command contains a NUL byte")
    if not 0 < timeout_seconds <= MAX_TIMEOUT_S:
        raise ToolRefused(f"timeout_seconds must be over 0 and at most {MAX_TIMEOUT_S:g}")
    cwd = workdir.inside(subdir)
    if not cwd.is_dir():
        raise ToolRefused(f"{subdir!r} is not a directory")
    marker = command_reaper.new_marker()
    pending = command_reaper.starting(marker)
    try:
        process = await asyncio.create_subprocess_exec(
            "/bin/sh",
            "-c",
            command,
            cwd=cwd,
            env={**os.environ, MARKER_VARIABLE: marker},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    except BaseException:  # a cancel can come after the fork: leave nothing behind
        pending.signal_all(signal.SIGKILL)
        command_reaper.ended(pending)
        raise
    info = process_info(process.pid)
    processes = RunProcesses(marker, process.pid, info.start_time if info else 0)
    command_reaper.started(processes)
    stdout, stderr = _Capped(), _Capped()
    readers = asyncio.gather(stdout.drain(process.stdout), stderr.drain(process.stderr))
    timed_out = True
    try:
        timed_out = not await _exited(process, timeout_seconds)
    finally:  # a cancelled call too
        # Whatever is left (the command on a timeout, its background children either way)
        # would hold the pipes open and the call with them.
        survivors = await processes.terminate(grace=0)
        await process.wait()
        command_reaper.ended(processes)
    await asyncio.wait_for(readers, 5)
    return {
        "exit_code": None if timed_out else process.returncode,
        "timed_out": timed_out,
        "stdout": stdout.text(),
        "stderr": stderr.text(),
        "stdout_bytes": stdout.total,
        "stderr_bytes": stderr.total,
        "truncated": stdout.total > OUTPUT_CAP or stderr.total > OUTPUT_CAP,
        "note": _note(stdout, stderr, timed_out, timeout_seconds, survivors),
    }


async def _exited(process: asyncio.subprocess.Process, timeout: float) -> bool:
    """Whether the shell itself exits within `timeout`. (Process.wait() would also wait for
    its pipes to close, which a child left in the background holds open.)"""
    deadline = asyncio.get_running_loop().time() + timeout
    while process.returncode is None:
        if asyncio.get_running_loop().time() >= deadline:
            return False
        await asyncio.sleep(0.01)
    return True


class _Capped:
    def __init__(self):
        self.kept = bytearray()
        self.total = 0

    async def drain(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            self.total += len(chunk)
            room = OUTPUT_CAP - len(self.kept)
            if room > 0:
                self.kept += chunk[:room]

    def text(self) -> str:
        return self.kept.decode("utf-8", "replace")


def _note(stdout, stderr, timed_out: bool, timeout: float, survivors: list[int]) -> str:
    notes = []
    if timed_out:
        notes.append(f"timed out after {timeout:g} s: the command and its children were killed")
    for name, stream in (("stdout", stdout), ("stderr", stderr)):
        if stream.total > OUTPUT_CAP:
            notes.append(f"{name} cut at {OUTPUT_CAP} of {stream.total} bytes (the first kept)")
    if survivors:
        notes.append(f"processes {survivors} outlived SIGKILL")
    return "; ".join(notes)


# -- list_directory --------------------------------------------------------------------------


def list_directory(
    workdir: Workdir,
    path: str = ".",
    include_hidden: bool = False,
    offset: int = 0,
    limit: int = 1000,
) -> dict:
    if not 1 <= limit <= MAX_PAGE:
        raise ToolRefused(f"limit must be 1 to {MAX_PAGE}")
    if offset < 0:
        raise ToolRefused("offset must be 0 or more")
    directory = workdir.inside(path)
    if not directory.is_dir():
        raise ToolRefused(f"{path!r} is not a directory")
    try:
        with os.scandir(directory) as found:
            entries = [e for e in found if include_hidden or not e.name.startswith(".")]
    except OSError as error:
        raise ToolRefused(f"cannot read {path!r}: {error.strerror}") from None
    entries.sort(key=lambda entry: entry.name)
    page = entries[offset : offset + limit]
    return {
        "path": str(directory.relative_to(workdir.root)) if directory != workdir.root else ".",
        "total": len(entries),
        "offset": offset,
        "entries": [_entry(entry) for entry in page],
        "more": offset + len(page) < len(entries),
    }


def _entry(entry: os.DirEntry) -> dict:
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError:
        return {"name": entry.name, "type": "unreadable"}
    if stat.S_ISLNK(info.st_mode):
        kind = "symlink"
    elif stat.S_ISDIR(info.st_mode):
        kind = "directory"
    elif stat.S_ISREG(info.st_mode):
        kind = "file"
    else:
        kind = "other"
    row = {"name": entry.name, "type": kind}
    if kind == "file":
        row["size"] = info.st_size
    return row
