"""The code a run ran: its workdir's git commit and a patch of what was not committed, and
how a host that does not see the workdir makes the same files again.

`take(workdir)` reads the commit (HEAD) and a binary patch of every change against it:
tracked files edited or deleted, and untracked files that .gitignore does not hide, all
through a temporary index so that the user's own index is never touched. `.agents/` (run
logs, loops' files) is never part of it. `bundle()` packs the commit's history for a host
with no remote to fetch it from; `materialize()` makes the files again: a bare cache repo
of the host's own gets the commit (from the bundle or from a remote), `git worktree add`
checks it out in a folder of the run's, and `git apply` replays the patch.

Git runs from argument lists, never a shell, each call with a timeout; a failure raises
CodeError with git's own words.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from agentsys import git_status

MAX_PATCH_BYTES = 10 * 1024 * 1024  # what a run records of its uncommitted changes
MAX_UNTRACKED_BYTES = 64 * 1024 * 1024  # untracked files read (and hashed) to make the patch
MAX_BUNDLE_BYTES = 200 * 1024 * 1024  # a commit's history, packed, stored in the database
LOCAL_TIMEOUT = 60.0  # seconds for a git call on local files
FETCH_TIMEOUT = 300.0  # for a fetch from a remote
COMMIT_RE = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
# Where git can fetch from: a URL of a transport that only fetches, scp-like user@host:path,
# or an absolute path. Not ext:: or fd:: (they run commands), not an option ("-...").
REMOTE_RE = re.compile(
    r"^(?:(?:https?|ssh|git|file)://[^\s\x00]+|[\w.-]+@[\w.-]+:[^\s\x00]+|/[^\s\x00]*)$",
    re.ASCII,
)
# `.agents/` anywhere: the runs' files of that workdir, not its code.
PATHSPEC = (".", ":(exclude,glob)**/.agents/**")
DIFF_OPTIONS = (
    "--binary",
    "--full-index",
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--no-renames",
    "--src-prefix=a/",
    "--dst-prefix=b/",
)
CACHE_REF = "refs/agentsys/"  # the cache repo keeps every commit it checked out under one


class CodeError(Exception):
    """The code could not be recorded or made again; the message says why."""


@dataclass(frozen=True)
class Snapshot:
    commit: str
    patch: bytes  # b"" when nothing is uncommitted
    subdir: str  # the workdir inside its repository ("" at its top, else "a/b")
    toplevel: str

    @property
    def digest(self) -> str:
        return patch_digest(self.patch)

    @property
    def files(self) -> int:
        return patch_files(self.patch)


def patch_digest(patch: bytes) -> str:
    return hashlib.sha256(patch).hexdigest() if patch else ""


def patch_files(patch: bytes) -> int:
    """How many files a patch changes."""
    return patch.count(b"\ndiff --git ") + patch.startswith(b"diff --git ")


def check_commit(commit: str) -> str:
    if not COMMIT_RE.match(commit):
        raise CodeError(f"commit {commit[:80]!r} is not a full git commit id (40 hex digits)")
    return commit


def check_remote(remote: str) -> str:
    if not REMOTE_RE.match(remote):
        raise CodeError(
            f"remote {remote[:200]!r} is not a git URL (https://, ssh://, git://, file://), "
            "user@host:path or an absolute path"
        )
    return remote


# -- recording ---------------------------------------------------------------------------------


def take(workdir: str | Path, *, max_patch: int = MAX_PATCH_BYTES) -> Snapshot | None:
    """The workdir's commit and uncommitted changes; None when it is not in a git work tree
    (or its repository has no commit yet, or ignores the workdir). Raises CodeError when
    the changes are too large to record, or git fails on the repository. Two git calls for
    a work tree with changes, one for a clean one (agentsys.git_status)."""
    place = _place(Path(workdir))
    if place is None:
        return None
    if place.prefix and _ignored(workdir):
        return None  # e.g. a folder inside a checkout that .gitignore hides: not its code
    status = git_status.parse_status(
        _git(place.top, *git_status.STATUS_OPTIONS, "--", *PATHSPEC).stdout
    )
    if status.commit is None:
        return None  # no commit yet: nothing a host could check out
    _check_untracked_size(place.top, status.untracked)
    if status.untracked:
        patch = _diff_with_untracked(place.top, place.index, status.untracked)
    elif status.changed:
        patch = _git(place.top, "diff", *DIFF_OPTIONS, "HEAD", "--", *PATHSPEC).stdout
    else:
        patch = b""
    if len(patch) > max_patch:
        raise CodeError(
            f"the uncommitted changes in {place.top} make a {_mib(len(patch))} patch, over the "
            f"{_mib(max_patch)} a run records: commit them (or .gitignore large files)"
        )
    return Snapshot(commit=status.commit, patch=patch, subdir=place.prefix, toplevel=place.top)


def _place(workdir: Path) -> git_status.Place | None:
    """Where the workdir is in its repository; None outside one, without starting git."""
    if git_status.environment_names_repository():
        return _ask_place(workdir)
    entry = git_status.nearest_git_entry(workdir)
    return _places(workdir, entry) if entry is not None else None


def _ask_place(workdir: Path) -> git_status.Place | None:
    try:
        found = _git(
            workdir,
            "rev-parse",
            "--show-toplevel",
            "--show-prefix",
            "--path-format=absolute",
            "--git-path",
            "index",
            check=False,
        )
    except (FileNotFoundError, NotADirectoryError):  # no git, or no such workdir
        return None
    return git_status.parse_place(found.stdout) if found.returncode == 0 else None


_places = git_status.Places(_ask_place)


def _ignored(workdir: str | Path) -> bool:
    return _git(workdir, "check-ignore", "-q", ".", check=False).returncode == 0


def _check_untracked_size(top: str, paths: list[str]) -> None:
    sizes = []
    for path in paths:
        with contextlib.suppress(OSError):
            sizes.append((os.lstat(Path(top) / path).st_size, path))
    total = sum(size for size, _ in sizes)
    if total > MAX_UNTRACKED_BYTES:
        largest = ", ".join(f"{p} ({_mib(s)})" for s, p in sorted(sizes, reverse=True)[:3])
        raise CodeError(
            f"untracked files in {top} hold {_mib(total)}, over the {_mib(MAX_UNTRACKED_BYTES)} "
            f"a run's patch may read (largest: {largest}); .gitignore them or commit them"
        )


def _diff_with_untracked(top: str, index: str, untracked: list[str]) -> bytes:
    """The diff against HEAD of the work tree with its untracked files added, made in a copy
    of the index (its stat data spares rehashing unchanged files): the user's stays as it was."""
    with tempfile.TemporaryDirectory(prefix="agentsys-index-") as scratch:
        temporary = Path(scratch) / "index"
        env = {"GIT_INDEX_FILE": str(temporary)}
        if Path(index).is_file():
            shutil.copyfile(index, temporary)
        else:
            _git(top, "read-tree", "HEAD", env=env)
        _git(top, "add", "-A", "--", *PATHSPEC, env=env)
        diff = ("diff", "--cached", *DIFF_OPTIONS, "HEAD", "--", *PATHSPEC)
        return _git(top, *diff, env=env).stdout


def bundle(
    workdir: str | Path, commit: str, *, base: str = "", max_bytes: int = MAX_BUNDLE_BYTES
) -> bytes:
    """The history of `commit`, the workdir's HEAD, as a git bundle; with `base` (an ancestor
    of it, see is_ancestor) only what `base` lacks. Raises CodeError when it is over
    `max_bytes` or HEAD has moved on from `commit`."""
    since = (f"^{check_commit(base)}",) if base else ()
    with tempfile.TemporaryFile() as out:
        # A bundle needs a ref to name its tip (a bare commit id is refused): HEAD, checked.
        _git(workdir, "bundle", "create", "-q", "-", "HEAD", *since, stdout=out)
        size = out.tell()
        if size > max_bytes:
            raise CodeError(
                f"the history of {commit[:12]} packs to {_mib(size)}, over the "
                f"{_mib(max_bytes)} stored for a host to check it out; push it and name the "
                "run's code.remote instead"
            )
        out.seek(0)
        data = out.read()
    tips = bundle_tips(data)
    if commit not in tips:
        raise CodeError(f"HEAD moved on from {commit[:12]} while its history was packed")
    return data


def is_ancestor(workdir: str | Path, base: str, commit: str) -> bool:
    found = _git(workdir, "merge-base", "--is-ancestor", base, commit, check=False)
    return found.returncode == 0


def bundle_tips(data: bytes) -> list[str]:
    """The commits a bundle's header names (its refs' tips)."""
    header = data[: data.find(b"\n\n") if b"\n\n" in data else 0].decode(errors="replace")
    return [line.split(" ", 1)[0] for line in header.splitlines()[1:] if line[:1] not in "-@"]


# -- making the files again ---------------------------------------------------------------------


# Loads the stored bundle of a commit: (its data, the commit it was made on top of, "" for
# a whole history), or None when none is stored.
BundleLoader = Callable[[str], "tuple[bytes, str] | None"]


def materialize(
    cache_dir: str | Path,
    target: str | Path,
    commit: str,
    patch: bytes = b"",
    bundle: bytes | BundleLoader | None = None,
    remote: str = "",
) -> None:
    """Check `commit` out at `target` (which must not exist) and apply `patch` there. The
    commit comes from the cache repo at `cache_dir` if it has it, else from `bundle` (a whole
    history, or a loader called only when needed, following each bundle's base until the
    cache has it) or `remote`."""
    check_commit(commit)
    cache, target = Path(cache_dir), Path(target)
    cache.mkdir(parents=True, exist_ok=True)
    with _locked(cache):  # one host's executors share the cache: one writer at a time
        if not (cache / "HEAD").exists():
            _git(cache, "init", "-q", "--bare", ".")
        if not _has_commit(cache, commit):
            _fetch(cache, commit, bundle, remote)
        _git(cache, "worktree", "prune")
        target.parent.mkdir(parents=True, exist_ok=True)
        _git(cache, "worktree", "add", "-q", "--detach", "--force", str(target), commit)
    if patch:
        _git(target, "apply", "--binary", "--whitespace=nowarn", "-", stdin=patch)


def _fetch(cache: Path, commit: str, bundle, remote: str) -> None:
    errors = []
    try:
        bundled = _unbundle_chain(cache, commit, bundle) if bundle else False
    except CodeError as error:
        bundled = True
        errors.append(f"from its bundle: {error}")
    if remote and not _has_commit(cache, commit):
        check_remote(remote)
        try:
            _git(cache, "fetch", "-q", "--no-tags", remote, commit, timeout=FETCH_TIMEOUT)
        except CodeError as error:  # a server that refuses fetching by id: all its branches
            branches = "+refs/heads/*:refs/agentsys-remote/*"
            with contextlib.suppress(CodeError):
                _git(cache, "fetch", "-q", "--no-tags", remote, branches, timeout=FETCH_TIMEOUT)
            if not _has_commit(cache, commit):
                errors.append(f"from {remote}: {error}")
    if not _has_commit(cache, commit):
        if not bundled and not remote:
            errors.append("no bundle of it is stored and the run names no code.remote")
        raise CodeError(f"commit {commit[:12]} could not be fetched: {'; '.join(errors)}")
    _git(cache, "update-ref", CACHE_REF + commit, commit)  # kept: gc never drops it


def _unbundle_chain(cache: Path, commit: str, bundle) -> bool:
    """Unbundle `commit`'s bundle, after the bundles of its bases the cache lacks (oldest
    first); False when no bundle of it is stored."""
    if not callable(bundle):
        chain = [bundle]
    else:
        chain, wanted = [], commit
        while wanted and not _has_commit(cache, wanted):
            found = bundle(wanted)
            if found is None:
                if not chain:
                    return False
                raise CodeError(f"no bundle of {wanted[:12]}, on which the newer ones build")
            data, wanted = found
            chain.append(data)
    for data in reversed(chain):
        with tempfile.NamedTemporaryFile(dir=cache, suffix=".bundle") as file:
            file.write(data)
            file.flush()
            _git(cache, "bundle", "unbundle", file.name)
    return True


def _has_commit(cache: Path, commit: str) -> bool:
    found = _git(cache, "cat-file", "-e", f"{commit}^{{commit}}", check=False)
    return found.returncode == 0


def remove_checkout(cache_dir: str | Path, target: str | Path) -> None:
    """Remove a checkout (a half-made one, before making it again)."""
    shutil.rmtree(target, ignore_errors=True)
    if (Path(cache_dir) / "HEAD").exists():
        with _locked(Path(cache_dir)):
            _git(cache_dir, "worktree", "prune", check=False)


# -- git ------------------------------------------------------------------------------------------


def _git(
    cwd: str | Path,
    *args: str,
    check: bool = True,
    env: dict | None = None,
    stdin: bytes | None = None,
    stdout=subprocess.PIPE,
    timeout: float = LOCAL_TIMEOUT,
) -> subprocess.CompletedProcess:
    command = ["git", "-c", "protocol.ext.allow=never", "-c", "core.quotepath=off", *args]
    environment = {**os.environ, **GIT_ENV, **(env or {})}
    environment.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
    try:
        done = subprocess.run(
            command,
            cwd=cwd,
            env=environment,
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.PIPE,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise CodeError(f"git {args[0]} took over {timeout:.0f} s in {cwd}") from None
    if check and done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip() or f"exit code {done.returncode}"
        raise CodeError(f"git {args[0]} in {cwd}: {said}")
    return done


# Never ask a person (no terminal is there), never write the index from a read, plain words.
GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}


@contextlib.contextmanager
def _locked(cache: Path) -> Iterator[None]:
    with open(cache / "agentsys.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _mib(size: int) -> str:
    return f"{size / 1024 / 1024:.1f} MiB"
