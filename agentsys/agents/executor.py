"""ExecutorAgent (L3): runs one command and watches it.

The command text is written to `command.txt` and run as `/bin/sh command.txt`, exactly as
typed (it is never spliced into other shell text), with stdin at EOF. It runs in its own
session under a fixed wrapper that writes its exit code to `job.done` when it ends, so the
code is recorded even if this worker or runagentd dies; a restarted executor (resumable)
re-adopts a run that is still alive, or reads the code it left.

The run is its whole process set (agentsys.proctree): stopping it ends every process of its
session and every process carrying its marker, SIGTERM then SIGKILL, before the run is
reported stopped; pausing it SIGSTOPs them all. When the command ends, whatever it left
running in the background is ended the same way, so its GPUs are free when they are released.

Its files are in its run directory, `<workdir>/.agents/runs/<agent id>/` (agentsys.run_dir
says what each holds); on a host that does not see the workdir, the workdir is a checkout of
the run's recorded code (agentsys.agents.run_checkout). With backend "slurm" the same wrapper
runs as a SLURM batch job instead (agentsys.slurm.job): SLURM places it, and stop and
pause go through SLURM.

It runs inside runagentd (`hosting = "local"`): whatever it does that blocks (files, /proc,
the database) goes to a thread, never onto runagentd's event loop.

A run's stop rules (`stop_when`, agentsys.stop_rules) are checked by its watchdog as each
metric row is read; one met is recorded on the run as `stopped_by` and the run is stopped as
a person's stop does it (the supervisor's stop cascade: processes, or the SLURM job, ended).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
from pathlib import Path

from agentsys import orphans
from agentsys.agent import Agent, PauseRefused
from agentsys.agents.executor_options import options_from
from agentsys.agents.run_checkout import place_of, run_dir_for
from agentsys.agents.run_watchdog import RunWatchdog
from agentsys.git_exclude import keep_out_of_git
from agentsys.gpu_conflicts import is_gpu_conflict
from agentsys.ipc import Cmd
from agentsys.log_shipping import shipping_log
from agentsys.metric_sources.changes import ChangeWatch, change_watch_for
from agentsys.metric_summary import summarize_metrics
from agentsys.proctree import (
    MARKER_VARIABLE,
    STOPPED_STATES,
    RunProcesses,
    is_running,
    process_info,
)
from agentsys.run_dir import (
    AGENTS_DIR,
    COMMAND_FILE,
    EXIT_CODE_FILE,
    LOG_FILE,
    METRICS_FILE,
    MLFLOW_DIR,
    PID_FILE,
    WANDB_DIR,
    read_exit_code,
    read_pid_file,
    record_terminated,
    run_dir_of,
    write_pid_file,
)
from agentsys.run_env import RunEnvironmentError, run_environment
from agentsys.slurm.job import Outcome, SlurmRun, cancel_leftover
from agentsys.types import AgentRole, AgentStatus, EntryType

logger = logging.getLogger("agentsys.executor")

LOG_TAIL_BYTES = 64 * 1024
KILL_WAIT_SECONDS = 2.0  # after SIGTERM, before SIGKILL
# How often a run with a wall_seconds rule is looked at (or one with any rule, where its files
# are not watched), against monitor_interval's 3 s for the others. A change to its metric
# files is looked at once it happens (agentsys.metric_sources.changes): a rule on a metric
# waits for no timer.
STOP_RULE_LOOK_SECONDS = 1.0
# Runs `/bin/sh command.txt` and records its exit code. The paths come in as arguments ($1:
# job.done, $2: command.txt): no text of the user's reaches this script.
WRAPPER = '/bin/sh "$2"; code=$?; echo "$code" > "$1.tmp" && mv "$1.tmp" "$1"'


class RunFailed(Exception):
    pass


class ExecutorAgent(Agent):
    role = AgentRole.EXECUTOR
    allowed_children = frozenset({AgentRole.SIDECAR})
    monitor_interval = 3.0
    resumable = True
    # Inside runagentd, not a worker process of its own: an executor mostly waits on its
    # run, which has a session of its own and outlives runagentd either way; a worker per
    # run cost ~40 ms of fork, Django and a database connection at every start (issue 25).
    hosting = "local"

    def __init__(self) -> None:
        super().__init__()
        # Nothing yet: a pause that comes before on_start has run (runagentd starts an
        # executor with the claim that places it) suspends nothing, and holds the start.
        self.processes = RunProcesses(marker="")
        self.slurm_job: SlurmRun | None = None
        self.changes: ChangeWatch | None = None  # looks on change; None: on the timer

    async def on_start(self) -> None:
        # The workdir, or a checkout of the run's recorded code on a host that lacks it.
        self.workdir = (await place_of(self)).cwd
        self.run_dir = run_dir_of(self.workdir, self.id)
        self.retry_policy, thresholds = options_from(self.config)
        self.watchdog = RunWatchdog(self, self.run_dir, self.config, thresholds)
        self.metrics = self.watchdog.metrics
        rules = self.watchdog.stop_rules
        # Looked at soon after each change when something acts on its rows (its rules, its
        # sweep's rungs); at most once a second otherwise (charts and alerts only).
        acts = bool(rules) or self.watchdog.rungs is not None
        self.changes = change_watch_for(
            self.metrics.watched(), backend=self.backend, stop_rules=acts
        )
        # A row is looked at once its file changes: the timer is left for a wall_seconds rule.
        if rules and (self.changes is None or rules.timed):
            self.monitor_interval = STOP_RULE_LOOK_SECONDS
        self.run_pid: int | None = None
        self.processes = RunProcesses(marker=self.id)
        self.slurm_job = SlurmRun(self) if self.backend == "slurm" else None

    async def on_stop(self) -> None:
        if self.changes is not None:  # its fd and tasks end with the executor
            await self.changes.close()

    @property
    def backend(self) -> str:
        return self.config.get("backend", "subprocess")

    async def run(self):
        backend = self.backend
        if backend == "mock":
            return await self._run_mock()
        if backend == "callback":
            return await self._run_callback()
        if backend not in ("subprocess", "slurm"):
            raise ValueError(f"unknown backend {backend!r}: subprocess, slurm, callback or mock")
        return await self._run_command()

    # -- backends ----------------------------------------------------------------------------

    async def _run_mock(self):
        await asyncio.sleep(float(self.config.get("mock_delay", 0.1)))
        code = int(self.config.get("mock_exit_code", 0))
        result = {"exit_code": code, "output": self.config.get("mock_result", "ok")}
        await self.remember(EntryType.RESULT, result, tags=["result", "mock"])
        if code != 0:
            raise RunFailed(f"mock run exited with code {code}")
        return result

    async def _run_callback(self):
        path = self.config.get("callback", "")
        if path not in self.allowed_paths:
            raise RunFailed(f"callback {path!r} is not on the allow-list")
        import importlib

        module_name, _, attr = path.rpartition(".")
        outcome = await getattr(importlib.import_module(module_name), attr)(self.goal)
        await self.remember(EntryType.RESULT, {"output": outcome}, tags=["result"])
        return {"output": outcome}

    async def _run_command(self):
        command = self.full_command()
        self.environment()  # a `venv` that is none fails the run now, before anything starts
        self.run_dir.mkdir(parents=True, exist_ok=True)
        # Its log and files: never in the person's `git status` (once per workdir and process).
        await asyncio.to_thread(keep_out_of_git, self.workdir, f"{AGENTS_DIR}/")
        # Replaced, not rewritten in place: a re-adopted run's shell may still be reading it.
        _write_atomically(self.run_dir / COMMAND_FILE, command + "\n")
        # run.log into the database as it grows, for a web on another machine; all of it
        # stored before the run is said to be over.
        async with shipping_log(self, self.run_dir / LOG_FILE):
            if self.slurm_job is not None:
                outcome = await self._run_on_slurm()
            elif self.config.get("resume") and await self._was_started():
                outcome = Outcome(await self._adopt())
            else:
                outcome = Outcome(await self._run_with_retries(command))
        return await self._report(command, outcome)

    async def _run_on_slurm(self) -> Outcome:
        job = self.slurm_job
        if not (self.config.get("resume") and await job.adopt()):
            await self.check_pause()  # paused before it was submitted: submit once resumed
            if self._stop_requested:
                raise asyncio.CancelledError
            await job.submit()
        try:
            return await job.wait()
        except asyncio.CancelledError:
            if not self.detached:  # a stop cancels the job; losing runagentd does not
                await job.cancel()
            raise

    def on_command(self, message: dict) -> bool:
        if message["t"] != Cmd.JOB_STATE:
            return False
        if self.slurm_job is not None:
            self.slurm_job.update(message)
        return True

    async def _report(self, command: str, outcome: Outcome):
        """The run's result once its command ended (its metrics, its exit code), kept in
        memory for the agents; a non-zero code fails the executor with the reason."""
        exit_code = outcome.exit_code
        try:
            await self.on_monitor(final=True)  # the last metrics rows
        except Exception:  # bookkeeping must not turn a finished run into a failed one
            logger.exception("%s: could not store the last metrics", self.id)
        result = {"exit_code": exit_code, "run_dir": str(self.run_dir), "command": command}
        # What an agent reads of the metrics (their points are the run's series, not memory).
        whole_file = await asyncio.to_thread(summarize_metrics, self.run_dir / METRICS_FILE)
        summary = self.metrics.summary(whole_file)  # with TensorBoard, printed lines, ...
        if summary:
            result["metrics"] = summary
        if outcome.error:
            result["error"] = outcome.error
        elif exit_code != 0:
            result["error"] = (
                "lost: the run ended while no executor watched it, leaving no exit code"
                if exit_code is None
                else f"command exited with code {exit_code}"
            )
        await self.remember(EntryType.RESULT, result, tags=["result"])
        if "error" in result:
            raise RunFailed(result["error"])
        return result

    def full_command(self) -> str:
        command = str(self.config.get("command") or self.goal).strip()
        if not command:
            raise RunFailed("no command to run (config.command is empty)")
        params = self.config.get("params") or {}
        return command + "".join(f" --{k}={shlex.quote(str(v))}" for k, v in params.items())

    def environment(self) -> dict[str, str]:
        """The project's environment (agentsys.run_env), then what AgentSys owns."""
        try:
            env = run_environment(
                os.environ,
                workdir=Path(self.workdir),
                venv=self.config.get("venv"),
                env=self.config.get("env"),
            )
        except RunEnvironmentError as error:
            raise RunFailed(str(error)) from None
        # A CPU run sees no GPU rather than grabbing one it was not given.
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in self.config.get("gpu_indices", []))
        env["AGENTSYS_RUN_DIR"] = str(self.run_dir)
        env[MARKER_VARIABLE] = self.id  # finds every process of the run (agentsys.proctree)
        env["WANDB_DIR"] = str(self.run_dir / WANDB_DIR)
        env["WANDB_RUN_ID"] = self.id
        # MLflow and W&B log into the run dir, where the metric sources read them, unless the
        # run says where they go itself (its own tracking server, an online W&B run).
        if not env.get("MLFLOW_TRACKING_URI"):
            env["MLFLOW_TRACKING_URI"] = (self.run_dir / MLFLOW_DIR).as_uri()
            # MLflow 3 refuses its file store (in maintenance mode) unless told it may use it.
            env.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        if not env.get("WANDB_MODE") and not env.get("WANDB_API_KEY"):
            env["WANDB_MODE"] = "offline"
        return env

    async def _run_with_retries(self, command: str) -> int | None:
        policy = self.retry_policy
        attempt = 0
        while True:
            attempt_start = _size(self.run_dir / LOG_FILE)
            exit_code = await self._launch_and_wait(attempt)
            if exit_code == 0:
                return exit_code
            # Only this attempt's output: an OOM an earlier attempt printed is not news.
            pattern = is_gpu_conflict(self._log_tail(since=attempt_start))
            if pattern is None:
                return exit_code
            if not policy.should_retry(attempt + 1):
                await self.alert(
                    "critical",
                    f"GPU conflict persisted after {attempt} retries ({pattern}); giving up",
                    "gpu_conflict_final",
                    {"pattern": pattern, "attempts": attempt + 1},
                )
                return exit_code
            attempt += 1
            delay = policy.delay(attempt)
            await self.alert(
                "warning",
                f"GPU conflict ({pattern}); retry {attempt}/{policy.max_retries} in {delay:g}s",
                "gpu_conflict_retry",
                {"pattern": pattern, "attempt": attempt, "delay": delay},
            )
            # A pause during the back-off holds the retry: it starts once resumed.
            await asyncio.sleep(delay)

    async def _launch_and_wait(self, attempt: int) -> int | None:
        (self.run_dir / EXIT_CODE_FILE).unlink(missing_ok=True)
        try:
            process = await self._launch(attempt)
            try:
                await process.wait()
            finally:
                orphans.no_longer_awaited(process.pid)
            # The command is over; what it left running in the background is not the next
            # run's to share the GPU with.
            await self._end_processes(grace=KILL_WAIT_SECONDS)
        except asyncio.CancelledError:
            if not self.detached:  # a stop kills the run; losing runagentd does not
                await self._kill_run()
            raise
        return _exit_code(self.run_dir, fallback=process.returncode)

    async def _launch(self, attempt: int) -> asyncio.subprocess.Process:
        """Start the command, once not paused: a pause cannot slip in between the check and
        the start (both happen under the pause lock)."""
        while True:
            await self.check_pause()
            if self._stop_requested:  # stopped while paused: nothing to start
                raise asyncio.CancelledError
            async with self.pause_lock:
                if self.status != AgentStatus.PAUSED:
                    return await self._start_process(attempt)

    async def _start_process(self, attempt: int) -> asyncio.subprocess.Process:
        with open(self.run_dir / LOG_FILE, "ab") as log:
            if attempt:
                log.write(f"\n--- retry {attempt} ---\n".encode())
                log.flush()
            process = await asyncio.create_subprocess_exec(
                "/bin/sh",
                "-c",
                WRAPPER,
                "agentsys-run",
                str(self.run_dir / EXIT_CODE_FILE),
                str(self.run_dir / COMMAND_FILE),
                cwd=self.workdir,
                env=self.environment(),
                stdin=asyncio.subprocess.DEVNULL,  # a command that reads stdin gets EOF
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,  # outlives this worker; its session is the run
            )
        orphans.awaited(process.pid)  # runagentd's child: its reaper must leave it to asyncio
        self.run_pid = process.pid
        # With the pid, the start time names one process, even after the pid is reused.
        info = process_info(process.pid)
        started = info.start_time if info is not None else 0
        self.processes = RunProcesses(self.id, process.pid, started)
        write_pid_file(self.run_dir, process.pid, str(started) if info is not None else "")
        self.emit_event(
            "run_started", {"pid": process.pid, "attempt": attempt, "run_dir": str(self.run_dir)}
        )
        return process

    async def _was_started(self) -> bool:
        """Whether the previous executor started the run: its job.pid, or, when runagentd
        was killed between the start and that write, a process carrying the run's marker
        (started again, the run would run twice)."""
        return (self.run_dir / PID_FILE).exists() or bool((await self._marked_leader())[0])

    async def _marked_leader(self) -> tuple[int, str]:
        """The run's first process found by its marker (0 when none lives): its wrapper
        shell, which writes job.done last."""
        members = await asyncio.to_thread(RunProcesses(self.id).members)
        if not members:
            return 0, ""
        leader = min(members, key=lambda info: (info.start_time, info.pid))
        return leader.pid, str(leader.start_time)

    async def _adopt(self) -> int | None:
        """Resume after a restart: follow the run the previous executor started."""
        pid, started = read_pid_file(self.run_dir) or (0, "")
        if not is_running(pid, started):
            # It ended (and the pid may since be some other process's), or job.pid was cut
            # short by the kill: a run still going is found by its marker, never killed.
            pid, started = await self._marked_leader()
        self.run_pid = pid or None
        self.processes = RunProcesses(self.id, pid, int(started or 0) if pid else 0)
        done = self.run_dir / EXIT_CODE_FILE
        self.emit_event("run_adopted", {"pid": pid, "alive": bool(pid)})
        await self._keep_a_pause()
        try:
            while not done.exists() and is_running(pid, started):
                await asyncio.sleep(0.5)
            await self._end_processes(grace=KILL_WAIT_SECONDS)
        except asyncio.CancelledError:
            if not self.detached:
                await self._kill_run()
            raise
        return read_exit_code(self.run_dir)

    async def _keep_a_pause(self) -> None:
        """A run paused when its executor was lost is still suspended: say so, rather than
        running with every process stopped until someone pauses and resumes it."""
        members = await asyncio.to_thread(self.processes.members)
        if not members or any(p.state not in STOPPED_STATES for p in members):
            return
        async with self.pause_lock:
            if self.status in (AgentStatus.RUNNING, AgentStatus.PAUSED):
                # PAUSED: it was paused by a person, and restarted so (START_PAUSED).
                self.emit_event("run_paused", {"pids": [p.pid for p in members], "adopted": True})
            if self.status == AgentStatus.RUNNING:
                self.mark_paused()

    async def _kill_run(self) -> None:
        """A stop: end every process of the run, and only then record it ended."""
        await self._end_processes(grace=KILL_WAIT_SECONDS)
        record_terminated(self.run_dir)

    async def _end_processes(self, grace: float) -> None:
        survivors = await self.processes.terminate(grace)
        if survivors:  # only a process stuck in the kernel outlives SIGKILL
            logger.error("%s: processes %s survived SIGKILL", self.id, survivors)
            self.emit_event("run_kill_incomplete", {"pids": survivors})

    @classmethod
    async def end_leftovers(cls, agent_id: str, config: dict) -> None:
        """Called by the supervisor for an executor whose worker is gone or will not stop:
        the run's processes end before its end is recorded and its GPUs go to another."""
        backend = config.get("backend", "subprocess")
        if backend == "slurm":
            await cancel_leftover(run_dir_for(config, agent_id))
            return
        if backend != "subprocess":
            return  # no process of its own
        pid, started = read_pid_file(run_dir_for(config, agent_id)) or (0, "")
        processes = RunProcesses(agent_id, pid, int(started or 0) if pid else 0)
        survivors = await processes.terminate(grace=0)
        if survivors:
            logger.error("%s: processes %s survived SIGKILL", agent_id, survivors)

    def stop_itself(self) -> None:
        """Stop the run as a person's stop does, through the supervisor: its children first,
        its processes or SLURM job ended, the run recorded `stopped`. In the background: the
        stop cancels the watchdog that asks for it."""
        if not self._stop_requested:
            self._in_background(self._link.stop(self.id))

    # -- pause ---------------------------------------------------------------------------------

    async def on_pause(self) -> None:
        """Pausing suspends the run's processes (SIGSTOP); its GPUs stay booked. A backend
        with no process to suspend refuses, rather than saying paused while it runs on."""
        backend = self.backend
        if self.slurm_job is not None and self.slurm_job.job_id is not None:
            return await self.slurm_job.suspend()
        if backend not in ("subprocess", "slurm"):
            raise PauseRefused(f"the {backend} backend runs no process that can be suspended")
        pids = await self.processes.suspend()
        self.emit_event("run_paused", {"pids": pids})

    async def on_resume(self) -> None:
        if self.slurm_job is not None and self.slurm_job.job_id is not None:
            return await self.slurm_job.resume()
        pids = await self.processes.resume()
        self.emit_event("run_resumed", {"pids": pids})

    def _log_tail(self, since: int = 0) -> str:
        log = self.run_dir / LOG_FILE
        with contextlib.suppress(OSError), open(log, "rb") as handle:
            handle.seek(max(since, log.stat().st_size - LOG_TAIL_BYTES))
            return handle.read().decode("utf-8", "replace")
        return ""

    # -- watchdog ----------------------------------------------------------------------------

    async def on_monitor(self, *, final: bool = False) -> None:
        await self.watchdog.look(final=final)

    async def until_next_look(self) -> None:
        changes = self.changes
        if changes is None:
            return await super().until_next_look()
        changes.watch(self.metrics.watched())  # printed lines, once no longer read, wake none
        # The timer stays as the backstop: a wall_seconds rule changes no file.
        await changes.next_look(self.monitor_interval)
        if changes.take_new_files():
            self.metrics.rescan_soon()


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _exit_code(run_dir: Path, *, fallback: int | None) -> int | None:
    code = read_exit_code(run_dir)
    return fallback if code is None else code


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
