"""Where an executor runs its command: in the run's workdir, or in a checkout of the code the
run recorded (agentsys.code_snapshot) when this host does not see that workdir.

In place when the run was made on this host (its code_host is ours) and the workdir is here,
or when the workdir is here and holds exactly the recorded commit and patch (a shared disk).
Otherwise the executor checks the code out in `<checkouts_dir>/<agent id>/` (the host's
AGENTSYS_WORKDIR/.agents/checkouts), from the host's cache repository, fetching the commit
from its stored bundle or the run's remote, and runs there; the run's row then says where
(its code_dir and run_dir). A re-adopted run (runagentd restarted, a worker relaunched)
finds its complete checkout and runs on in it: a checkout is never made again over a run.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from pathlib import Path

from agentsys import code_snapshot
from agentsys.code_snapshot import CodeError
from agentsys.run_dir import AGENTS_DIR, CHECKOUT_MARK, CHECKOUTS_DIR, run_dir_of

BACKENDS_WITH_A_WORKDIR = ("subprocess", "slurm")


class CheckoutFailed(Exception):
    """The run's code cannot be made on this host; the message says why and what to do."""


@dataclass(frozen=True)
class Place:
    cwd: Path  # where the command runs
    code_dir: str = ""  # the checkout it runs in; "" for the workdir itself


def workdir_of(config: dict) -> Path:
    return Path(config.get("workdir") or os.getcwd())


def checkouts_dir(deployment) -> Path:
    if deployment.checkouts_dir:
        return Path(deployment.checkouts_dir)
    return Path(deployment.workdir or os.getcwd()) / AGENTS_DIR / CHECKOUTS_DIR


def cache_dir(deployment) -> Path:
    if deployment.code_cache_dir:
        return Path(deployment.code_cache_dir)
    return checkouts_dir(deployment).parent / "code-cache.git"


def run_dir_for(config: dict, agent_id: str) -> Path:
    """The run directory of an executor that may have run in a checkout (its config says
    so once the checkout is recorded)."""
    done = _finished_checkout(config.get("code_dir") or "")
    return run_dir_of(done.cwd if done else workdir_of(config), agent_id)


async def place_of(agent) -> Place:
    """Where `agent` (an ExecutorAgent, wired) runs its command; checks its code out first
    when it must. Raises CheckoutFailed."""
    config, deployment = agent.config, agent.deployment
    workdir = workdir_of(config)
    if agent.backend not in BACKENDS_WITH_A_WORKDIR:
        return Place(workdir)
    target = checkouts_dir(deployment) / agent.id
    for recorded in (config.get("code_dir") or "", str(target)):
        if done := _finished_checkout(recorded):  # re-adopted: it runs on where it ran
            return done
    code = await agent.in_runs("run_code")
    if not code:  # no run port attached, or no Run row: as before, in the workdir
        return Place(workdir)
    here = workdir.is_dir()
    if here and code["host"] and code["host"] == deployment.host_name:
        return Place(workdir)
    if not code["commit"]:
        if here:
            return Place(workdir)
        raise CheckoutFailed(_nothing_to_check_out(workdir, deployment.host_name, code))
    if here and await asyncio.to_thread(_holds, workdir, code):
        return Place(workdir)
    place = await asyncio.to_thread(_check_out, agent, code, target)
    await agent.in_runs(
        "record_checkout", code_dir=place.code_dir, run_dir=str(run_dir_of(place.cwd, agent.id))
    )
    agent.emit_event(
        "code_checked_out",
        {"code_dir": place.code_dir, "commit": code["commit"], "cwd": str(place.cwd)},
    )
    return place


def _nothing_to_check_out(workdir: Path, host: str, code: dict) -> str:
    said = f" ({code['error']})" if code.get("error") else ""
    return (
        f"workdir {workdir} is not on host {host or 'this host'} and the run recorded no git "
        f"commit to check out{said}; make the workdir a git repository or name code.remote"
    )


def _holds(workdir: Path, code: dict) -> bool:
    """Whether the workdir here holds the recorded code (a disk shared with its host)."""
    try:
        snap = code_snapshot.take(workdir)
    except CodeError:
        return False
    return snap is not None and (snap.commit, snap.digest) == (
        code["commit"],
        code["patch_digest"],
    )


def _check_out(agent, code: dict, target: Path) -> Place:
    """Make the checkout (a half-made one from an earlier try is removed first), then mark
    it complete. Runs in a thread: git and the database calls block."""
    cache = cache_dir(agent.deployment)
    commit = code["commit"]
    runs = agent.runs
    code_snapshot.remove_checkout(cache, target)
    try:
        code_snapshot.materialize(
            cache,
            target,
            commit,
            code["patch"] or b"",
            bundle=lambda wanted: runs.code_bundle(commit=wanted),
            remote=code["remote"],
        )
    except CodeError as error:
        said = f" ({code['error']})" if code.get("error") else ""
        raise CheckoutFailed(
            f"the run's code ({commit[:12]}) could not be checked out on host "
            f"{agent.deployment.host_name or 'this host'}: {error}{said}"
        ) from None
    mark = {"commit": commit, "patch_digest": code["patch_digest"], "subdir": code["subdir"]}
    (target / AGENTS_DIR).mkdir(exist_ok=True)
    (target / AGENTS_DIR / CHECKOUT_MARK).write_text(json.dumps(mark))
    return Place(target / code["subdir"], str(target))


def _finished_checkout(code_dir: str) -> Place | None:
    if not code_dir:
        return None
    try:
        mark = json.loads((Path(code_dir) / AGENTS_DIR / CHECKOUT_MARK).read_text())
    except (OSError, ValueError):
        return None
    return Place(Path(code_dir) / str(mark.get("subdir") or ""), code_dir)
