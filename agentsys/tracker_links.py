"""The online tracker runs a script logs to, found in what it prints.

A run that logs to W&B online or to an MLflow tracking server of its own is left alone by the
metric sources (its points live on that server); what AgentSys keeps is the link, as the
tracker itself prints it:

- W&B (wandb/sdk/wandb_run.py, at init and at finish):
  `wandb: 🚀 View run <name> at: https://wandb.ai/<entity>/<project>/runs/<id>`
- MLflow (mlflow/tracking/_tracking_service/client.py, at the end of a run on a server):
  `🏃 View run <name> at: http://<server>/#/experiments/<e>/runs/<id>`

Colour codes (wandb styles its links with click) are removed first. Only the head and the
tail of run.log are looked at, since trackers print there and a log may be gigabytes.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

SCAN_BYTES = 64 * 1024  # of the log's head and of its tail
MAX_URL = 2000
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\x1b\]8;[^\x07\x1b]*(?:\x07|\x1b\\)")
VIEW_RUN = re.compile(r"View run\b[^\n]*?\bat:?[ \t]+(?P<url>https?://[^\s'\"<>]+)")


def tracker_of(line: str) -> str:
    if "wandb" in line.split("View run", 1)[0].lower() or "wandb.ai" in line:
        return "wandb"
    if "🏃" in line or "/#/experiments/" in line:
        return "mlflow"
    return "tracker"


def find_tracker_urls(text: str) -> dict[str, str]:
    """{tracker: url} for each `View run ... at: <url>` line; a later line of a tracker wins
    (the run's final link)."""
    found: dict[str, str] = {}
    for line in ANSI.sub("", text).splitlines():
        match = VIEW_RUN.search(line)
        if match and len(match["url"]) <= MAX_URL:
            found[tracker_of(line)] = match["url"]
    return found


def tracker_urls_in_log(path: Path) -> dict[str, str]:
    """The tracker links in the head and the tail of a run's log; {} when it has none."""
    with contextlib.suppress(OSError), open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        head = handle.read(SCAN_BYTES)
        tail = b""
        if size > SCAN_BYTES:
            handle.seek(max(SCAN_BYTES, size - SCAN_BYTES))
            tail = handle.read(SCAN_BYTES)
        text = head.decode("utf-8", "replace") + "\n" + tail.decode("utf-8", "replace")
        return find_tracker_urls(text)
    return {}
