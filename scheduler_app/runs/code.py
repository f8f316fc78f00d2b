"""The code a run runs, recorded where it is made (agentsys.code_snapshot does the git):
the workdir's commit, a patch of its uncommitted changes (a CodePatch, stored once per
content), the host whose disk holds the workdir, and once per commit a bundle of its history
(a CodeBundle) for the hosts that have no remote to fetch it from. An executor on a host that
does not see the workdir reads them (runtime_app.memory_view) to check the code out, and
records here where it ran.

Recording costs one chain of git calls per run (three processes for a clean or edited work
tree, four inside a subfolder) plus, once per commit, `git bundle create`; the git runs
before the run's transaction opens."""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass

from django.db import transaction

from agents_app.models import Agent
from agentsys.code_snapshot import (
    MAX_PATCH_BYTES,
    CodeError,
    bundle,
    check_commit,
    check_remote,
    is_ancestor,
    patch_digest,
    patch_files,
    take,
)
from agentsys.shared_snapshot import SharedSnapshots
from scheduler_app.models import CodeBundle, CodePatch, Run


class CodeRefused(ValueError):
    """A run's `code` a script sent cannot be used (the message says why)."""


@dataclass(frozen=True)
class RecordedCode:
    commit: str = ""
    patch: bytes = b""
    remote: str = ""
    host: str = ""
    subdir: str = ""
    error: str = ""
    top: str = ""  # the work tree's top folder, where it was recorded
    bundle: bytes | None = None  # the commit's history, when no row holds it yet
    bundle_base: str = ""  # the bundled commit `bundle` builds on ("" for all of it)

    def fields(self) -> dict:
        return {
            "code_commit": self.commit,
            "code_patch_digest": patch_digest(self.patch),
            "code_remote": self.remote,
            "code_host": self.host,
            "code_subdir": self.subdir,
            "code_error": self.error,
        }


NOTHING = RecordedCode()
# Runs submitted at once (a script's threads, the web's requests) share one snapshot of their
# workdir, never one taken before they were asked for (agentsys.shared_snapshot).
_take_shared = SharedSnapshots(take)


def take_here(workdir: str, *, host: str, bundled: Collection[str] = ()) -> RecordedCode:
    """The code of a workdir this process sees (`host` is this machine's name); nothing
    when it does not see it. A work tree too large to record is said in `error`. No bundle
    is made of a commit in `bundled` (a batch of runs stores one already)."""
    if not workdir or not os.path.isdir(workdir):
        return NOTHING
    try:
        snap = _take_shared(workdir)
    except CodeError as error:
        return RecordedCode(host=host, error=f"its code was not recorded: {error}")
    if snap is None:  # not git: it runs where the workdir is, or nowhere
        return RecordedCode(host=host)
    code = RecordedCode(
        commit=snap.commit, patch=snap.patch, host=host, subdir=snap.subdir, top=snap.toplevel
    )
    if snap.commit in bundled or CodeBundle.objects.filter(commit=snap.commit).exists():
        return code
    base = _base_for(workdir, snap.commit, host=host, top=snap.toplevel)
    try:
        data = bundle(workdir, snap.commit, base=base)
    except CodeError as error:  # it still runs here, or from a remote a rerun names
        return _replace(code, error=f"no host but {host} can check it out: {error}")
    return _replace(code, bundle=data, bundle_base=base)


def _base_for(workdir: str, commit: str, *, host: str, top: str) -> str:
    """The newest bundled commit of this repository that `commit` descends from: its
    bundle then holds only what came since (a loop's iteration, a few files)."""
    newest = (
        CodeBundle.objects.filter(host=host, repository=top)
        .order_by("-created_at")
        .values_list("commit", flat=True)
        .first()
    )
    return newest if newest and is_ancestor(workdir, newest, commit) else ""


def from_request(code: dict) -> RecordedCode:
    """The `code` a script sent with its run ({commit, remote, patch}): its workdir is
    elsewhere, so a host fetches the commit from the remote (or a bundle stored before)."""
    try:
        commit = check_commit(str(code.get("commit") or ""))
        remote = check_remote(code["remote"]) if code.get("remote") else ""
    except CodeError as error:
        raise CodeRefused(f"code: {error}") from None
    patch = str(code.get("patch") or "").encode()
    if len(patch) > MAX_PATCH_BYTES:
        raise CodeRefused(f"code.patch: over the {MAX_PATCH_BYTES} bytes a run records")
    if not remote and not CodeBundle.objects.filter(commit=commit).exists():
        raise CodeRefused(
            f"code.remote: needed, since no bundle of {commit[:12]} is stored for the hosts "
            "to fetch it from"
        )
    return RecordedCode(commit=commit, patch=patch, remote=remote)


def _replace(code: RecordedCode, **changes) -> RecordedCode:
    return RecordedCode(**{**code.__dict__, **changes})


def store_code(code: RecordedCode) -> dict:
    """Store the patch and bundle rows (once per content, whoever stores them first);
    returns the Run fields that name them."""
    if code.patch:
        row = CodePatch(
            digest=patch_digest(code.patch),
            data=code.patch,
            size=len(code.patch),
            files=patch_files(code.patch),
        )
        CodePatch.objects.bulk_create([row], ignore_conflicts=True)
    if code.bundle is not None:
        row = CodeBundle(
            commit=code.commit,
            base=code.bundle_base,
            data=code.bundle,
            size=len(code.bundle),
            host=code.host,
            repository=code.top,
        )
        CodeBundle.objects.bulk_create([row], ignore_conflicts=True)
    return code.fields()


def carried_over(run: Run) -> RecordedCode:
    """A run's code as recorded, for a rerun made where its workdir cannot be seen."""
    return RecordedCode(
        commit=run.code_commit,
        patch=patch_of(run),
        remote=run.code_remote,
        host=run.code_host,
        subdir=run.code_subdir,
        error=run.code_error,
    )


# -- reads --------------------------------------------------------------------------------------


def patch_of(run: Run) -> bytes:
    if not run.code_patch_digest:
        return b""
    data = CodePatch.objects.filter(pk=run.code_patch_digest).values_list("data", flat=True)
    return bytes(data.first() or b"")


def patch_file_count(run: Run) -> int:
    if not run.code_patch_digest:
        return 0
    found = CodePatch.objects.filter(pk=run.code_patch_digest).values_list("files", flat=True)
    return found.first() or 0


def summary(run: Run) -> dict:
    """What GET /api/runs/{id} says of a run's code."""
    return {
        "commit": run.code_commit,
        "remote": run.code_remote,
        "patch_digest": run.code_patch_digest,
        "has_patch": bool(run.code_patch_digest),
        "host": run.code_host,
        "dir": run.code_dir,
        "error": run.code_error,
    }


def code_for_agent(agent_id: str) -> dict | None:
    """What an executor needs to run its run's code: None when it has no run."""
    run = Run.objects.filter(agent_id=agent_id).order_by("-created_at").first()
    if run is None:
        return None
    return {
        "run_id": run.id,
        "commit": run.code_commit,
        "patch": patch_of(run),
        "patch_digest": run.code_patch_digest,
        "remote": run.code_remote,
        "host": run.code_host,
        "subdir": run.code_subdir,
        "error": run.code_error,
    }


def bundle_of(commit: str) -> tuple[bytes, str] | None:
    """The stored bundle of `commit` and the commit it builds on ("" for a whole history)."""
    found = CodeBundle.objects.filter(pk=commit).values_list("data", "base").first()
    return (bytes(found[0]), found[1]) if found is not None else None


# -- writes from the executor --------------------------------------------------------------------


@transaction.atomic
def record_checkout(*, agent_id: str, code_dir: str, run_dir: str) -> bool:
    """Where the run's executor checked its code out and runs it; its agent's config keeps it
    too, so that a restarted runagentd re-adopts the run there. False when it has no run."""
    agent = Agent.objects.select_for_update().filter(pk=agent_id).first()
    if agent is not None:
        agent.config = {**agent.config, "code_dir": code_dir}
        agent.save(update_fields=["config"])
    return bool(Run.objects.filter(agent_id=agent_id).update(code_dir=code_dir, run_dir=run_dir))
