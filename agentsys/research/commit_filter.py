"""Which of a loop's changed files its commit takes: code, never outputs.

Files the repository ignores never reach here (git leaves them out). Of the rest, outputs are
known by their kind: TensorBoard event files, an MLflow store (`mlruns/`), W&B's folder
(`wandb/`), checkpoints, any binary file over 1 MB and any file over 10 MB. A pattern the
person allows (`commit_allow`, shell-style, matched against the path from the repository's
top or against the file's name) lets such a file in.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path, PurePosixPath

BINARY_LIMIT = 1_000_000
SIZE_LIMIT = 10_000_000
CHECKPOINT_SUFFIXES = (".pt", ".pth", ".ckpt", ".safetensors")
OUTPUT_FOLDERS = {"mlruns": "an MLflow store (mlruns/)", "wandb": "W&B's files (wandb/)"}
SNIFF_BYTES = 8000  # as git's own binary check reads


def why_left_out(root: Path, rel: str, allowed: tuple[str, ...] = ()) -> str | None:
    """Why the changed file `rel` (under `root`) stays out of the commit; None to take it.
    A path that no longer exists (a deletion) is always taken."""
    if _allowed(rel, allowed):
        return None
    path = PurePosixPath(rel)
    for part in path.parts[:-1]:
        if part in OUTPUT_FOLDERS:
            return OUTPUT_FOLDERS[part]
    if path.name.startswith("events.out.tfevents."):
        return "a TensorBoard event file"
    if path.name.lower().endswith(CHECKPOINT_SUFFIXES):
        return f"a checkpoint (*{path.suffix})"
    try:
        size = os.lstat(root / rel).st_size
    except OSError:
        return None
    if size > SIZE_LIMIT:
        return f"over 10 MB ({size / 1e6:.0f} MB)"
    if size > BINARY_LIMIT and _is_binary(root / rel):
        return f"a binary file over 1 MB ({size / 1e6:.1f} MB)"
    return None


def _allowed(rel: str, allowed: tuple[str, ...]) -> bool:
    name = PurePosixPath(rel).name
    return any(fnmatch.fnmatchcase(rel, p) or fnmatch.fnmatchcase(name, p) for p in allowed)


def _is_binary(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return b"\0" in handle.read(SNIFF_BYTES)
    except OSError:
        return False
