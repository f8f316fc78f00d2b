"""git for the research loop: one call, with a timeout, as AgentSys, never prompting.

A failure is a result (its code and output), never an exception: no git call can fail a loop.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path

GIT_TIMEOUT = 30.0
# Commits are made by AgentSys, whoever runs it and whatever git's own config says.
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "AgentSys",
    "GIT_AUTHOR_EMAIL": "agentsys@localhost",
    "GIT_COMMITTER_NAME": "AgentSys",
    "GIT_COMMITTER_EMAIL": "agentsys@localhost",
}


@dataclass(frozen=True)
class GitResult:
    code: int
    out: str
    data: bytes = b""  # the same output, as git wrote it (a binary patch)

    @property
    def ok(self) -> bool:
        return self.code == 0


async def git(cwd: str | Path, *args: str, stdin: bytes | None = None) -> GitResult:
    """`git -C cwd args…`, its stdout and stderr together."""
    try:
        process = await asyncio.create_subprocess_exec(
            "git",
            "-C",
            str(cwd),
            *args,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, **GIT_IDENTITY, "GIT_TERMINAL_PROMPT": "0"},
        )
    except OSError as error:  # no git on this machine
        return GitResult(127, str(error))
    try:
        out, _ = await asyncio.wait_for(process.communicate(stdin), GIT_TIMEOUT)
    except TimeoutError:
        process.kill()
        await process.wait()
        return GitResult(124, f"git {args[0]} timed out after {GIT_TIMEOUT:.0f} s")
    return GitResult(process.returncode or 0, out.decode(errors="replace"), out)
