"""runagentd's view of its SLURM jobs: one squeue (plus at most one sacct) per tick for all
of them, handed to each executor over its worker pipe.

Each SLURM run's executor (agentsys.slurm.job) lives in a worker of its own; if each
asked SLURM itself, 200 runs would cost 200 squeue calls a tick and load slurmctld. So the
executor announces its job id (a `slurm_job_submitted` / `slurm_job_adopted` event, seen by
the supervisor), and this poller asks about every announced job at once and sends each
executor a Cmd.JOB_STATE when its job's state, reason or exit code changed. A controller that
does not answer is said to each executor once (their runs go on; SLURM keeps the jobs).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable

from agentsys.ipc import Cmd
from agentsys.slurm import client as slurm

logger = logging.getLogger("agentsys.slurm")

JOB_EVENTS = frozenset({"slurm_job_submitted", "slurm_job_adopted"})


class SlurmPoller:
    def __init__(
        self,
        send: Callable[[str, dict], bool],
        query: Callable[[Iterable[int]], dict] = slurm.job_states,
    ):
        self.send = send  # (agent id, message) -> delivered; the supervisor's send_to
        self.query = query
        self.jobs: dict[str, int] = {}  # agent id -> its job id
        self._told: dict[str, tuple] = {}  # agent id -> the last message it got
        self._error = ""

    def watch(self, agent_id: str, job_id: int) -> None:
        self.jobs[agent_id] = int(job_id)
        self._told.pop(agent_id, None)  # a re-adopting executor must hear the state again

    def forget(self, agent_id: str) -> None:
        self.jobs.pop(agent_id, None)
        self._told.pop(agent_id, None)

    async def poll(self) -> int:
        """Ask SLURM about every watched job; returns how many executors were told."""
        jobs = dict(self.jobs)
        if not jobs:
            return 0
        try:
            states = await asyncio.to_thread(self.query, jobs.values())
        except slurm.SlurmError as error:
            return self._unreachable(jobs, str(error))
        if self._error:
            logger.info("SLURM answers again")
            self._error = ""
        told = 0
        for agent_id, job_id in jobs.items():
            state = states.get(job_id)
            message = {
                "t": Cmd.JOB_STATE,
                "job_id": job_id,
                "state": state.state if state else None,
                "reason": state.reason if state else None,
                "exit_code": state.exit_code if state else None,
            }
            key = tuple(message.values())
            # A job SLURM does not know is said every time: the executor counts them.
            if state is not None and self._told.get(agent_id) == key:
                continue
            if self.send(agent_id, message):
                self._told[agent_id] = key
                told += 1
        return told

    def _unreachable(self, jobs: dict[str, int], error: str) -> int:
        if error != self._error:
            logger.warning("SLURM does not answer: %s", error)
            self._error = error
        for agent_id, job_id in jobs.items():
            self.send(agent_id, {"t": Cmd.JOB_STATE, "job_id": job_id, "error": error})
            self._told.pop(agent_id, None)  # tell the state again once it answers
        return 0

    async def run(self, interval: float, stopping: asyncio.Event) -> None:
        while not stopping.is_set():
            try:
                await self.poll()
            except Exception:  # the poller must outlive any one bad answer
                logger.exception("SLURM poll failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), interval)


class SlurmUnavailable(RuntimeError):
    """AGENTSYS_SLURM=on, but this host cannot submit to SLURM (the message says why)."""


def detect(mode: str) -> str | None:
    """Whether this runagentd submits SLURM runs: None for no, else what it found. "auto"
    uses SLURM when its controller answers at start; "on" requires it."""
    if mode == "off":
        return None
    usable, detail = slurm.available()
    if usable:
        logger.info("SLURM runs will be submitted from here (%s)", detail)
        return detail
    if mode == "on":
        raise SlurmUnavailable(f"AGENTSYS_SLURM=on, but {detail}")
    logger.info("no SLURM runs from here: %s", detail)
    return None
