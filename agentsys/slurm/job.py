"""An executor's run as a SLURM batch job (backend "slurm"; docs/architecture.md, "The GPU queue").

SLURM places the job and its GPUs: AgentSys books none of its own, and the job sees what
SLURM sets (CUDA_VISIBLE_DEVICES, SLURM_JOB_GPUS). The batch script is the local backend's
wrapper as a file: it runs command.txt and writes the exit code to job.done, so a run's files
are the same whichever backend ran it, and the log, metrics and alerts work unchanged.

The executor never asks SLURM itself while it waits: runagentd's poller
(agentsys.slurm.poller) asks once per tick for every SLURM run of the host and hands each
executor its job's state (Cmd.JOB_STATE). The executor turns that into AgentSys's words: the
run stays `queued` with SLURM's reason until the job runs, then `running`, and ends with the
code in job.done (or, when SLURM ended the job itself, sacct's).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shlex
import time
from dataclasses import dataclass

from agentsys.agent import PauseRefused
from agentsys.run_dir import (
    EXIT_CODE_FILE,
    LOG_FILE,
    SLURM_JOB_FILE,
    SLURM_SCRIPT_FILE,
    read_exit_code,
    read_slurm_job,
    record_terminated,
)
from agentsys.slurm import client as slurm
from agentsys.slurm.client import SlurmError, SlurmJobSpec

logger = logging.getLogger("agentsys.executor")

STOP_WAIT_SECONDS = 60.0  # after scancel, how long a stop waits for SLURM to end the job
STOP_POLL_SECONDS = 0.5
# How often a waiting executor looks at its job's files (job.started, job.done): a stat, far
# cheaper than asking SLURM, and it is how a run shows running as soon as its job does. Most
# often while SLURM starts a job on an idle cluster (under a second), then less, then seldom
# (200 waiting runs: 2,000 looks/s): (seconds since submit or adoption, the look's interval).
FILE_LOOKS = ((3.0, 0.003), (10.0, 0.01))
FILE_LOOK_SLOW = 0.1
STARTED_FILE = "job.started"
# The poller reports a job SLURM knows nothing of this many times in a row before the run is
# given up as lost (a job just submitted is always known; this covers a purged record).
MISSING_POLLS = 5
SLURM_OPTIONS = ("partition", "account", "time_limit", "qos", "constraint")


def job_state_of_event(kind: str, payload: dict) -> tuple[int, bool, str] | None:
    """What a SLURM executor's event says of its run's row: (job id, running, SLURM's reason
    while it waits), or None for any other event. runagentd's store applies it as it records
    the event, in one transaction on its own connection: a worker opening a connection of its
    own for it cost 10-20 ms of every start (issue 22's submit overhead)."""
    job_id = payload.get("job_id")
    if not isinstance(job_id, int) or isinstance(job_id, bool):
        return None
    if kind == "slurm_job_submitted":
        return job_id, False, "submitted"
    if kind == "slurm_job_pending":
        return job_id, False, str(payload.get("reason") or "")
    if kind == "run_started":
        return job_id, True, ""
    return None


class RunRefusedBySlurm(Exception):
    """sbatch refused the job: it can never run as asked (the run becomes `rejected`)."""


class SlurmRunFailed(Exception):
    """SLURM could not take or keep the job (not installed, controller down at submit)."""


@dataclass(frozen=True)
class Outcome:
    exit_code: int | None
    error: str | None = None  # set when SLURM, not the command, decided the end


def batch_script(run_dir) -> str:
    """The job: command.txt under /bin/sh, its code into job.done, and the same code for
    SLURM (so sacct and job.done agree)."""
    done = shlex.quote(str(run_dir / EXIT_CODE_FILE))
    started = shlex.quote(str(run_dir / STARTED_FILE))
    command = shlex.quote(str(run_dir / "command.txt"))
    return (
        "#!/bin/sh\n"
        "# Written by AgentSys: runs command.txt and records its exit code in job.done.\n"
        f": > {started}\n"
        f"/bin/sh {command} </dev/null\n"
        "code=$?\n"
        f'echo "$code" > {done}.tmp && mv {done}.tmp {done}\n'
        'exit "$code"\n'
    )


class SlurmRun:
    """One executor's SLURM job: submit or re-adopt it, follow the states the poller hands
    over, and cancel, suspend or resume it."""

    def __init__(self, executor):
        self.executor = executor
        self.run_dir = executor.run_dir
        self.job_id: int | None = None
        self.state: str | None = None
        self.reason: str | None = None
        self.exit_code: int | None = None
        self.missing = 0
        self.unreachable = ""
        self._shown = ""  # what the run's row last said: "pending:<reason>" or "running"
        self._news = asyncio.Event()

    # -- start ---------------------------------------------------------------------------------

    def spec(self) -> SlurmJobSpec:
        config = self.executor.config
        own = config.get("slurm") or {}
        if not isinstance(own, dict):
            raise SlurmRunFailed(f"slurm options must be an object, got {own!r}")
        unknown = sorted(set(own) - set(SLURM_OPTIONS))
        if unknown:
            raise SlurmRunFailed(f"unknown slurm options {unknown}: {', '.join(SLURM_OPTIONS)}")
        options = {**self.executor.deployment.slurm_options, **own}
        return SlurmJobSpec(
            self.run_dir / SLURM_SCRIPT_FILE,
            job_name=f"agentsys-{self.executor.id}",
            gpus=config.get("gpu_required", 0),
            workdir=self.executor.workdir,
            output=self.run_dir / LOG_FILE,
            **{key: options[key] for key in SLURM_OPTIONS if options.get(key)},
        )

    async def submit(self) -> None:
        script = self.run_dir / SLURM_SCRIPT_FILE
        script.write_text(batch_script(self.run_dir))
        script.chmod(0o755)
        (self.run_dir / EXIT_CODE_FILE).unlink(missing_ok=True)
        (self.run_dir / STARTED_FILE).unlink(missing_ok=True)
        env = self.executor.environment()
        # SLURM sets the GPUs it gives the job; ours would name none.
        env.pop("CUDA_VISIBLE_DEVICES", None)
        try:
            spec = self.spec()
            self.job_id = await asyncio.to_thread(slurm.submit, spec, env=env)
        except SlurmError as error:
            if str(error).startswith(slurm.REFUSED):
                raise RunRefusedBySlurm(str(error)) from None
            raise SlurmRunFailed(str(error)) from None
        (self.run_dir / SLURM_JOB_FILE).write_text(f"{self.job_id}\n")
        # The run's row takes the job id from this event (job_state_of_event).
        self.executor.emit_event(
            "slurm_job_submitted", {"job_id": self.job_id, "run_dir": str(self.run_dir)}
        )

    async def adopt(self) -> bool:
        """After a restart: follow the job the previous executor submitted; False when it
        never submitted one."""
        self.job_id = read_slurm_job(self.run_dir)
        if self.job_id is None:
            return False
        self.executor.emit_event("slurm_job_adopted", {"job_id": self.job_id})
        return True

    # -- news from the poller --------------------------------------------------------------------

    def update(self, message: dict) -> None:
        """A Cmd.JOB_STATE from runagentd's poller."""
        if message.get("job_id") != self.job_id:
            return  # about a job this executor no longer follows
        if "error" in message:
            if message["error"] != self.unreachable:
                self.unreachable = message["error"]
                self.executor.emit_event(
                    "slurm_unreachable", {"job_id": self.job_id, "error": self.unreachable}
                )
            return
        self.unreachable = ""
        state = message.get("state")
        self.missing = self.missing + 1 if state is None else 0
        self.state, self.reason = state, message.get("reason")
        self.exit_code = message.get("exit_code")
        self._news.set()

    async def wait(self) -> Outcome:
        """Until the job has ended; then its exit code. The run's row follows the job: the
        poller's news says it waits (with SLURM's reason) or ended, and the job's own files
        say at once that it started (job.started) or ended (job.done), without waiting for a
        poll."""
        since = time.monotonic()
        while True:
            waited = time.monotonic() - since
            look = next((every for until, every in FILE_LOOKS if waited < until), FILE_LOOK_SLOW)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._news.wait(), look)
            news = self._news.is_set()
            self._news.clear()
            if (self.run_dir / STARTED_FILE).exists():
                self._show_running()
            if (code := read_exit_code(self.run_dir)) is not None:
                self._show_running()  # one too short to be seen running still ran
                return Outcome(code)
            if not news:
                continue
            if self.state is None:
                if self.missing >= MISSING_POLLS:
                    return Outcome(None, f"lost: SLURM no longer knows job {self.job_id}")
            elif self.state == "PENDING":
                self._show_pending(self.reason or "")
            else:  # RUNNING, SUSPENDED, COMPLETING, or ended
                self._show_running()
                if self.state in slurm.FINAL_STATES:
                    return self._outcome()

    def _outcome(self) -> Outcome:
        code = read_exit_code(self.run_dir)
        if code is not None:
            return Outcome(code)
        code = self.exit_code
        if self.state in ("COMPLETED", "FAILED"):
            return Outcome(code)
        # SLURM ended it before the command could say (time limit, node failure, scancel).
        return Outcome(code, f"SLURM ended job {self.job_id}: {self.state} (exit code {code})")

    def _show_pending(self, reason: str) -> None:
        if self._shown in ("running", f"pending:{reason}"):
            return
        self._shown = f"pending:{reason}"
        self.executor.emit_event(
            "slurm_job_pending", {"job_id": self.job_id, "reason": reason, "status": "queued"}
        )

    def _show_running(self) -> None:
        if self._shown == "running":
            return
        self._shown = "running"
        # The row says running in the event's own transaction: a page that re-reads the run
        # on this event sees it so.
        self.executor.emit_event(
            "run_started", {"job_id": self.job_id, "attempt": 0, "status": "running"}
        )

    # -- stop, pause -------------------------------------------------------------------------

    async def cancel(self) -> None:
        """scancel, then wait (bounded) until SLURM says the job ended, so no process of it
        is left when the run is reported stopped."""
        if self.job_id is None:
            return
        try:
            await asyncio.to_thread(slurm.cancel, self.job_id)
            deadline = time.monotonic() + STOP_WAIT_SECONDS
            while time.monotonic() < deadline:
                states = await asyncio.to_thread(slurm.job_states, [self.job_id])
                state = states.get(self.job_id)
                if state is None or state.finished:
                    break
                await asyncio.sleep(STOP_POLL_SECONDS)
            else:
                logger.error("%s: SLURM job %s still not ended", self.executor.id, self.job_id)
        except SlurmError as error:
            logger.error("%s: cancelling SLURM job %s: %s", self.executor.id, self.job_id, error)
            self.executor.emit_event(
                "run_kill_incomplete", {"job_id": self.job_id, "error": str(error)}
            )
        record_terminated(self.run_dir)

    async def suspend(self) -> None:
        if self._shown != "running" or self.state in slurm.FINAL_STATES:
            raise PauseRefused(
                f"SLURM job {self.job_id} is {(self.state or 'not known yet').lower()}"
                f"{f' ({self.reason})' if self.reason else ''}: nothing runs to suspend; "
                "stop cancels it"
            )
        try:
            await asyncio.to_thread(slurm.suspend, self.job_id)
        except SlurmError as error:
            raise PauseRefused(str(error)) from None
        self.executor.emit_event("run_paused", {"job_id": self.job_id})

    async def resume(self) -> None:
        try:
            await asyncio.to_thread(slurm.resume, self.job_id)
        except SlurmError as error:
            logger.error("%s: %s", self.executor.id, error)
        self.executor.emit_event("run_resumed", {"job_id": self.job_id})


async def cancel_leftover(run_dir) -> None:
    """The supervisor's last word on a SLURM run whose worker is gone: cancel its job."""
    job_id = read_slurm_job(run_dir)
    if job_id is None or read_exit_code(run_dir) is not None:
        return
    try:
        await asyncio.to_thread(slurm.cancel, job_id)
    except SlurmError as error:
        logger.error("cancelling SLURM job %s: %s", job_id, error)
    record_terminated(run_dir)
