"""The line of a run's log that says why it failed, for the run page: "command exited with
code 1" says that it failed, the log's last error line (a Python traceback's last line,
`OverflowError: (34, 'Numerical result out of range')`) says why. Only the log's tail is read:
a log can be gigabytes."""

from __future__ import annotations

import re
from pathlib import Path

from agentsys.run_dir import LOG_FILE

TAIL_BYTES = 64 * 1024
MAX_LENGTH = 300
# A traceback's last line: the exception's (dotted) name, then its message or nothing.
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Failure)\b(?::|$)")
_ERRORISH = re.compile(r"\b(?:error|fatal|killed|out of memory|segmentation fault)\b", re.I)


def last_error_line(run_dir: str) -> str:
    """The last exception line of run.log's tail, else its last line naming an error; ""
    when there is none (or no log)."""
    if not run_dir:
        return ""
    try:
        with (Path(run_dir) / LOG_FILE).open("rb") as handle:
            handle.seek(0, 2)
            handle.seek(max(0, handle.tell() - TAIL_BYTES))
            tail = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return error_line_in(tail)


def error_line_in(tail: str) -> str:
    """The last exception line of a log's tail, else its last line naming an error."""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    for pattern in (_EXCEPTION, _ERRORISH):
        for line in reversed(lines):
            if pattern.search(line):
                return line if len(line) <= MAX_LENGTH else line[: MAX_LENGTH - 1] + "…"
    return ""
