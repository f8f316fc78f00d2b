"""A research iteration's experiments: each one an ExecutorAgent child that goes through the
GPU queue (and so becomes a Run), waited on by its status events, then read back from its run
directory (exit code, log tail, metrics) for the next prompt; from the database when the run
ran on a host whose disk this one does not share (its log shipped by agentsys.log_shipping).

An experiment may only run inside the loop's workdir: a `workdir:` that leaves it is refused
with the reason, which the model reads in its next prompt.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import secrets
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path

from agentsys.memory import EntryQuery
from agentsys.metric_summary import summarize_metrics
from agentsys.registry import EXECUTOR_AGENT
from agentsys.research.reply import ExperimentSpec
from agentsys.research.results import (
    LOG_TAIL_BYTES,
    ExperimentResult,
    log_tail_lines,
    read_log_tail,
)
from agentsys.run_dir import EXIT_CODE_FILE, LOG_FILE, METRICS_FILE, read_exit_code, run_dir_of
from agentsys.run_waits import Held
from agentsys.types import AgentStatus, EntryType

logger = logging.getLogger("agentsys.research")

STOP_WAIT_SECONDS = 30.0  # after stopping a timed-out experiment, for its end to be recorded
# After the first of a batch ends, how long the loop waits for others ending with it: runs of
# one batch often end together, and each wake is a prompt (tokens) of its own.
SETTLE_SECONDS = 2.0


def resolve_workdir(root: Path, requested: str | None) -> Path:
    """The experiment's directory: `requested` (relative to the loop's workdir, or absolute)
    when it lies inside the workdir. ValueError saying why otherwise."""
    if not requested or requested.strip() in {"", "."}:
        return root
    candidate = (root / requested.strip()).resolve()
    if candidate != root.resolve() and root.resolve() not in candidate.parents:
        raise ValueError(f"workdir {requested!r} is outside the project directory {root}")
    if not candidate.is_dir():
        raise ValueError(f"workdir {requested!r} does not exist")
    return candidate


def new_launch_id() -> str:
    return secrets.token_hex(6)


async def launch(
    agent,
    specs: list[ExperimentSpec],
    *,
    root: Path,
    iteration: int,
    run_options: dict,
    launch: str = "",
) -> list[dict]:
    """Spawn one executor per spec; returns one record per spec: {goal, command, parameters,
    gpu_required, workdir, child_id} or, for one that could not start, {..., error}.
    `run_options`: the loop's executor options for every experiment (its metrics_pattern,
    backend and SLURM options). `launch` names this launch: launched again under the same
    name (after a restart), an experiment already spawned is found, not spawned twice."""
    launched = []
    for index, spec in enumerate(specs, start=1):
        record = {
            "goal": spec.goal,
            "command": spec.command,
            "parameters": spec.parameters,
            "gpu_required": spec.gpu_required,
            "workdir": "",
            "child_id": "",
        }
        # Paused between two spawns: no experiment starts until the loop is resumed.
        await agent.check_pause()
        try:
            workdir = resolve_workdir(root, spec.workdir)
            record["workdir"] = str(workdir)
            handle = await agent.spawn_child(
                EXECUTOR_AGENT,
                spec.goal,
                {
                    "command": spec.command,
                    "workdir": str(workdir),
                    "params": spec.parameters,
                    "gpu_required": spec.gpu_required,
                    **run_options,
                    "experiment": {
                        "research_agent_id": agent.id,
                        "iteration": iteration,
                        "index": index,
                        **({"launch": launch} if launch else {}),
                    },
                },
            )
            record["child_id"] = handle.id
        except Exception as error:  # refused: a bad workdir, a bad GPU count, the runtime
            record["error"] = f"not started: {error}"
        launched.append(record)
    return launched


async def wait_for(agent, launched: list[dict], *, timeout: float) -> list[ExperimentResult]:
    """Wait for every launched experiment to end (each at most `timeout` seconds from its
    launch; a late one is stopped), then read their results."""
    by_record = _handles(agent, launched)
    outcomes = await asyncio.gather(*(_wait_one(agent, h, timeout) for _, h in by_record))
    return [
        await _result(agent, record, handle, timed_out)
        for (record, handle), timed_out in zip(by_record, outcomes, strict=True)
    ]


@dataclass
class News:
    """What woke a loop waiting on its experiments: those that ended (read), those still
    running (their launch records), and the first end in words, for its next prompt."""

    results: list[ExperimentResult]
    running: list[dict]
    woke: str
    held: Held | None = None  # a condition of the loop's wake_when that woke it


async def wait_for_news(
    agent,
    launched: list[dict],
    *,
    timeout: float,
    settle: float = SETTLE_SECONDS,
    watch: Awaitable[Held] | None = None,
) -> News:
    """Wait until one launched experiment ends (stopped by its rule, failed, done, or past
    `timeout` and stopped), and for those that end within `settle` seconds of it; read
    them. The others go on, waited for by the loop's next iteration. `watch`
    (agentsys.research.run_wakes): a condition on the runs that wakes the loop first, every
    one of them still going on."""
    by_record = _handles(agent, launched)
    waits = {
        asyncio.ensure_future(_wait_one(agent, handle, timeout)): index
        for index, (_, handle) in enumerate(by_record)
    }
    ended_at: dict = {}
    for waiting in waits:  # before asyncio.wait's own callback: in the order they end
        waiting.add_done_callback(lambda w: ended_at.setdefault(w, time.monotonic()))
    watching = asyncio.ensure_future(watch) if watch is not None else None
    pending: set = set()
    try:
        done, pending = await asyncio.wait(
            [*waits, *([watching] if watching else [])], return_when=asyncio.FIRST_COMPLETED
        )
        if watching in done and not done - {watching}:
            held = watching.result()
            return News([], [record for record, _ in by_record], held.reason, held)
        done.discard(watching)
        if (others := pending - {watching}) and settle > 0:
            more, pending = await asyncio.wait(others, timeout=settle)
            done |= more
    finally:
        if watching is not None:
            watching.cancel()
        for waiting in pending or waits:
            waiting.cancel()
    first = waits[min(done, key=lambda w: ended_at.get(w, math.inf))]
    results, woke = [], ""
    for waiting, index in sorted(waits.items(), key=lambda item: item[1]):  # launch order
        if waiting in done:
            record, handle = by_record[index]
            results.append(await _result(agent, record, handle, waiting.result()))
            if index == first:
                woke = _woke_words(results[-1])
    running = [by_record[index][0] for waiting, index in waits.items() if waiting not in done]
    return News(results, running, woke)


async def still_running(agent, running: list[dict], woke: str) -> str:
    """For the next prompt: what woke the loop, and its experiments that go on."""
    if not running and not woke:
        return ""
    lines = [f"What woke you: {woke}"] if woke else []
    if running:
        lines.append(
            "Still running (their results come in a later prompt; stop one that is going "
            "nowhere with the stop_run tool, or launch a follow-up now):"
        )
    for record in running:
        name = await _run_of(agent, record["child_id"]) if record.get("child_id") else ""
        params = json.dumps(record.get("parameters") or {}, sort_keys=True, default=str)
        lines.append(
            f"- run {name or record.get('child_id') or '(not started)'}: {record['goal'][:200]}"
            f" (`{record['command'][:300]}`, parameters {params[:300]})"
        )
    return "\n".join(lines)


def _handles(agent, launched: list[dict]) -> list[tuple[dict, object]]:
    ids = [r["child_id"] for r in launched if r["child_id"]]
    handles = {i: agent.children[i] for i in ids if i in agent.children}
    # Only a resumed loop lacks handles: those children were spawned by its previous worker.
    missing = [i for i in ids if i not in handles]
    if missing:
        handles.update({h.id: h for h in agent.adopt_children(missing)})
    # A CRITICAL steer may respawn a child under a new id: the handle follows it.
    return [(r, handles.get(r["child_id"])) for r in launched]


def _woke_words(result: ExperimentResult) -> str:
    """'run r-… (its goal) ended stopped: stopped by its rule: loss is NaN …'"""
    name = result.run or result.run_id or "(not started)"
    said = f"run {name} ({result.goal}) ended {result.status}"
    return said + (f": {result.error}" if result.error else "")


async def _wait_one(agent, handle, timeout: float) -> bool:
    """True when the experiment had to be stopped for running past its time, counted from
    when this worker first waited on it. Time the loop spent paused (its experiments
    suspended with it) does not count."""
    if handle is None:
        return False
    clocks = agent.__dict__.setdefault("_experiment_clocks", {})
    started = clocks.setdefault(handle.id, agent.active_clock())
    while (left := timeout - (agent.active_clock() - started)) > 0:
        try:
            await handle.wait(timeout=left)
            return False
        except TimeoutError:  # paused meanwhile: that time is given back, so look again
            await agent.check_pause()  # (after the resume: no spinning while it stands still)
    if handle.status.is_terminal:  # it ended just as its time ran out
        return False
    await handle.cancel()
    with contextlib.suppress(TimeoutError):
        await handle.wait(timeout=STOP_WAIT_SECONDS)
    return True


async def _result(agent, record: dict, handle, timed_out: bool) -> ExperimentResult:
    result = ExperimentResult(
        goal=record["goal"],
        run_id=handle.id if handle is not None else "",
        command=record["command"],
        parameters=record["parameters"],
        gpu_required=record["gpu_required"],
        status="not started",
        exit_code=None,
        error=record.get("error", ""),
        log_tail="",
        metrics={},
        alerts=[],
    )
    if handle is None:
        return result
    result.status = str(handle.status)
    result.error = handle.error
    if timed_out:
        result.status, result.error = "timed out", "ran past its time limit and was stopped"
    result.run = await _run_of(agent, handle.id)
    if handle.status == AgentStatus.STOPPED and not timed_out:
        result.error = await _stopped_by(agent, handle.id) or result.error
    run_dir = run_dir_of(record["workdir"], handle.id)
    result.exit_code, result.log_tail = await _exit_code_and_log(agent, handle.id, run_dir)
    result.metrics = await _metrics(agent, handle.id, run_dir)
    result.alerts = await _alerts(agent, handle.id)
    if handle.status == AgentStatus.REJECTED and not result.error:
        result.error = "the GPU queue can never place it"
    return result


async def _run_of(agent, child_id: str) -> str:
    """The Run's id, which the model cites and a person finds on the runs page and in the
    API ("" when none is known: the model is told the executor's id instead)."""
    try:
        return await agent.in_runs("run_of", agent_id=child_id) or ""
    except Exception:  # the result matters more than its name
        logger.exception("%s: could not find the run of %s", agent.id, child_id)
        return ""


async def _stopped_by(agent, child_id: str) -> str:
    """What stopped the run, when a rule or its sweep's early stopping did, for the model."""
    try:
        words = await agent.in_runs("run_stopped_by", agent_id=child_id) or ""
    except Exception:
        logger.exception("%s: could not read what stopped %s", agent.id, child_id)
        return ""
    if not words:
        return ""
    return f"stopped by {'its sweep' if words.startswith('ASHA ') else 'its rule'}: {words}"


async def _exit_code_and_log(agent, child_id: str, run_dir: Path) -> tuple[int | None, str]:
    """From the run dir when it is on this disk; else as the database has them: the exit
    code its executor reported, the log its host shipped."""
    if await asyncio.to_thread(_on_this_disk, run_dir):
        log_tail = await asyncio.to_thread(read_log_tail, run_dir / LOG_FILE)
        return read_exit_code(run_dir), log_tail
    try:
        outcome = await agent.in_runs("run_outcome", agent_id=child_id, tail_bytes=LOG_TAIL_BYTES)
    except Exception:  # the rest of the result still goes to the model
        logger.exception("%s: could not read the outcome of %s", agent.id, child_id)
        outcome = None
    if not outcome:
        return None, ""
    return outcome["exit_code"], log_tail_lines(outcome["log_tail"], cut=outcome["cut"])


def _on_this_disk(run_dir: Path) -> bool:
    return (run_dir / EXIT_CODE_FILE).exists() or (run_dir / LOG_FILE).exists()


async def _alerts(agent, child_id: str) -> list[str]:
    try:
        entries = await agent.in_memory(
            "query", query=EntryQuery(agent_id=child_id, types=(EntryType.ALERT,), limit=20)
        )
    except Exception:  # the results matter more than their alerts
        logger.exception("%s: could not read the alerts of %s", agent.id, child_id)
        return []
    return [str((e.data or {}).get("message", e.data)) for e in entries or []]


async def _metrics(agent, child_id: str, run_dir) -> dict[str, dict]:
    """The run's metrics summary as its executor stored it in its result (every source:
    TensorBoard, printed lines, agent_metrics.jsonl); with no result (a stopped run), its
    stored series; else the jsonl file's own summary."""
    try:
        entries = await agent.in_memory(
            "query", query=EntryQuery(agent_id=child_id, types=(EntryType.RESULT,), limit=1)
        )
    except Exception:
        logger.exception("%s: could not read the result of %s", agent.id, child_id)
        entries = None
    for entry in entries or []:
        metrics = (entry.data or {}).get("metrics")
        if isinstance(metrics, dict) and metrics:
            return metrics
    try:  # no result: a run stopped (by a rule, a person), whose series were stored all along
        stored = await agent.in_runs("run_metrics", agent_id=child_id)
    except Exception:
        logger.exception("%s: could not read the metrics of %s", agent.id, child_id)
        stored = None
    if stored:
        return stored
    return await asyncio.to_thread(summarize_metrics, run_dir / METRICS_FILE)
