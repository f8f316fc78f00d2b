"""The runagentd core: the long-running process that hosts all agent activity on one host.

No Django here: the database is reached through a RuntimeStore (runtime_app.runtime_store),
and chat turns through a ChatStore (runtime_app.chat_store) when the daemon serves chat; their
calls all run on one dedicated thread (`db`), so the event loop never blocks on I/O and
the ORM keeps one connection. While the database cannot be reached, `db` retries with
backoff: the agents and their runs go on, and what they report waits (in order, per agent)
until it can be stored. Each step (register, reconcile, deliver commands, claim agents,
heartbeat, reap) is a method a test can call on its own; `run` loops over them, woken by
LISTEN/NOTIFY and by a slow fallback poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import dataclasses
import functools
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor

from agentsys import forkserver, orphans
from agentsys.chat.dispatch import dispatch_turns
from agentsys.chat.store import ChatLink, ChatStore
from agentsys.daemon_settings import DaemonSettings
from agentsys.listen import (
    AGENTS_CHANNEL,
    COMMANDS_CHANNEL,
    DB_RETRY_FIRST,
    DB_RETRY_MAX,
    QUEUE_CHANNEL,
    listen_for_work,
)
from agentsys.live_events import LiveEvents
from agentsys.metric_compaction import MetricCompaction
from agentsys.proctree import process_info
from agentsys.registry import AgentClassRegistry
from agentsys.slurm import poller as slurm_poller
from agentsys.store import CommandRecord, RuntimeStore, StoreUnavailable
from agentsys.supervisor import Supervisor
from agentsys.types import AgentStatus, CommandKind, SteerUrgency

logger = logging.getLogger("agentsys.daemon")

_PR_SET_CHILD_SUBREAPER = 36
DEFAULT_THREADS = 32  # for to_thread: see run()
LIVE_FLUSH_SECONDS = 0.5  # at the stop; what is left readers fetch from the table


class Daemon:
    def __init__(
        self,
        store: RuntimeStore,
        settings: DaemonSettings,
        publish: Callable[[dict], Awaitable] | None = None,
        list_gpu_processes: Callable[[], list] | None = None,
        on_stopping: Callable[[], None] | None = None,
        chat_store: ChatStore | None = None,
    ):
        self.store = store
        # None: this daemon serves no chat (its L1 agents and their turns are not here).
        self.chat_store = chat_store
        self.settings = settings
        # Called first thing on the way out: the agents' calls that wait for the database
        # in threads give up (agents inside runagentd detach; the next one resumes them).
        self.on_stopping = on_stopping or (lambda: None)
        # Live sends leave in order from a queue of their own: no start or end of an agent
        # waits for one (agentsys/live_events.py).
        self.live_events = LiveEvents(publish or _no_publish)
        self.publish = self.live_events
        self.host_id: int | None = None
        self.supervisor: Supervisor | None = None
        self.registry = AgentClassRegistry(settings.allowed_classes)
        self._stopping = asyncio.Event()
        self._wake = asyncio.Event()
        # What woke the loop: the NOTIFY channels heard since the last step, or everything
        # (None) after a poll, a reconnect or a wake from inside runagentd. A step looks only
        # where there is news: a freed GPU costs one claim, not five queries (issue 25).
        self._news: set[str] | None = None
        self._db_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentsys-db")
        # Chat replies stream on a thread (and connection) of their own: a token never
        # queues behind heartbeats, claims and agent events.
        self._stream_thread = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="agentsys-stream"
        )
        self._last_beat = 0.0
        self.compaction = MetricCompaction(store, self.settings.metrics_compact_after_days)
        self._last_poll = 0.0  # monotonic time of the last step that looked at everything
        self._known_children: set[int] = set()
        self._list_gpu_processes = list_gpu_processes
        self._watch_gpus = False  # set at register: only detected GPUs can be looked at
        self._db_down_since: float | None = None  # monotonic time of the first failure
        # When the database last came back: other hosts' heartbeats are judged only once
        # they have had time to resume (monotonic; -inf = it never went away).
        self._db_back_at = float("-inf")
        self.slurm_detail: str | None = None  # what register found of SLURM; None: no SLURM

    async def db(self, fn, /, _streaming: bool = False, **kwargs):
        """Run one store call on the database thread (`_streaming`: the chat stream's).
        While the database cannot be reached the call is repeated with backoff, so nothing
        an agent reports is lost and no caller needs its own retry; only a stopping daemon
        gives up (StoreUnavailable)."""
        loop = asyncio.get_running_loop()
        thread = self._stream_thread if _streaming else self._db_thread
        delay = DB_RETRY_FIRST
        while True:
            try:
                result = await loop.run_in_executor(thread, lambda: fn(**kwargs))
            except StoreUnavailable as error:
                self._database_down(error)
                if self._stopping.is_set():
                    raise
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), delay)
                delay = min(delay * 2, DB_RETRY_MAX)
                continue
            if self._db_down_since is not None:
                self._database_back()
            return result

    def _database_down(self, error: StoreUnavailable) -> None:
        if self._db_down_since is None:
            self._db_down_since = time.monotonic()
            logger.warning(
                "database unavailable (%s); agents and runs go on, their reports wait", error
            )

    def _database_back(self) -> None:
        self._db_back_at = time.monotonic()
        logger.warning(
            "database back after %.1fs; catching up", self._db_back_at - self._db_down_since
        )
        self._db_down_since = None
        self.wake_all()  # what was missed (commands, queued work) is looked at at once

    # -- steps ------------------------------------------------------------------------------

    async def register(self) -> int:
        from agentsys.gpus import detect_gpus

        found = await asyncio.to_thread(detect_gpus, self.settings.declared_gpus)
        self.slurm_detail = await asyncio.to_thread(slurm_poller.detect, self.settings.slurm)
        self.host_id = await self.db(
            self.store.register_host,
            name=self.settings.host_name,
            pid=os.getpid(),
            gpus=[dataclasses.asdict(gpu) for gpu in found],
            slurm=self.slurm_detail,
            labels=self.settings.labels,
        )
        self._watch_gpus = self.settings.foreign_gpu_min_mb > 0 and any(
            gpu.source != "declared" for gpu in found
        )
        logger.info(
            "runagentd %s registered host %r (id %s)",
            os.getpid(),
            self.settings.host_name,
            self.host_id,
        )
        return self.host_id

    async def start_supervisor(self) -> Supervisor:
        # Started now (it imports Django once), not on the first spawn.
        context, server_pid = await asyncio.get_running_loop().run_in_executor(
            None, forkserver.start, self.settings.forkserver_preload
        )
        self._known_children.add(server_pid)
        self.supervisor = Supervisor(
            store=self.store,
            db=self.db,
            publish=self.publish,
            registry=self.registry,
            host_id=self.host_id,
            mp_context=context,
            stop_grace=self.settings.stop_grace,
            memory_factory=self.settings.memory_factory,
            run_port_factory=self.settings.run_port_factory,
            default_workdir=self.settings.default_workdir,
            deployment=self.settings.deployment,
        )
        if self.slurm_detail is not None:
            self.supervisor.slurm_poller = slurm_poller.SlurmPoller(self.supervisor.send_to)
        self.supervisor.spare.refill()  # the first worker agent need not wait for a fork
        if self.chat_enabled:
            self.supervisor.chat = ChatLink(
                store=self.chat_store, db=self.db, publish=self.publish, wake=self.wake_all
            )
        return self.supervisor

    @functools.cached_property
    def _local_classes(self) -> frozenset[str]:
        """The allowed classes whose agents run inside runagentd."""
        local = set()
        for path in self.registry.allowed:
            with contextlib.suppress(Exception):  # one that cannot load fails when claimed
                if self.registry.resolve(path).hosting == "local":
                    local.add(path)
        return frozenset(local)

    @property
    def chat_enabled(self) -> bool:
        return self.chat_store is not None

    async def reconcile(self) -> None:
        """After a restart: agents this host ran are resumed (if their class can) or failed
        with the cause; nothing stays RUNNING forever. Chat replies it was streaming are
        interrupted (what came of them kept)."""
        if self.chat_enabled:
            for event in await self.db(self.chat_store.interrupt_lost_turns, host_id=self.host_id):
                await self.publish(event)
        # Runs the others declared lost with this host while it was down run again here.
        for event in await self.db(self.store.readopt_lost_runs, host_id=self.host_id):
            await self.publish(event)
        for record in await self.db(self.store.lost_agents, host_id=self.host_id):
            try:
                cls = self.registry.resolve(record.cls_path)
            except Exception as exc:
                _kill_leftover_worker(record)
                await self._fail(record.id, f"cannot restart: {exc}")
                continue
            if cls.hosting != "local":  # a local one's pid was the previous runagentd's
                _kill_leftover_worker(record)
            if record.status == AgentStatus.IDLE:
                await self.supervisor.launch(record, cls)
            elif cls.resumable:
                await self.supervisor.launch(record, cls, resume=True)
                await self.publish(
                    await self.db(
                        self.store.record_event,
                        agent_id=record.id,
                        kind="resumed_after_restart",
                        payload={},
                    )
                )
            else:
                await self._fail(
                    record.id,
                    f"runagentd on {self.settings.host_name} "
                    "restarted while this agent ran; its worker was lost",
                )

    async def _fail(self, agent_id: str, cause: str) -> None:
        event = await self.db(
            self.store.transition,
            agent_id=agent_id,
            status=AgentStatus.FAILED,
            kind="failed",
            payload={"error": cause},
            error=cause,
        )
        if event:
            await self.publish(event)

    async def deliver_commands(self) -> int:
        """Carry out stop/pause/resume/steer requests from the web."""
        commands = await self.db(
            self.store.claim_commands, host_id=self.host_id, limit=self.settings.claim_batch
        )
        for command in commands:
            delivered, detail = await self._apply(command)
            await self.db(
                self.store.finish_command, command_id=command.id, delivered=delivered, detail=detail
            )
        return len(commands)

    async def _apply(self, command: CommandRecord) -> tuple[bool, str]:
        supervisor, agent_id = self.supervisor, command.agent_id
        if agent_id not in supervisor.hosted:
            record = await self.db(self.store.get_agent, agent_id=agent_id)
            if record.status.is_terminal:
                return False, f"{agent_id} is {record.status}"
            if command.kind == CommandKind.STOP:  # not running anywhere: just close its row
                await supervisor.stop(agent_id)
                return True, "stopped (it was not running on any live host)"
            return False, f"{agent_id} is not running on any live host"
        if command.kind == CommandKind.STOP:
            supervisor.background(supervisor.stop(agent_id), f"stop:{agent_id}")
            return True, "stopping"
        if command.kind in (CommandKind.PAUSE, CommandKind.RESUME):
            touched = await supervisor.pause(agent_id, resume=command.kind == CommandKind.RESUME)
            return True, f"{command.kind}d {len(touched)} agent(s)"
        if command.kind == CommandKind.STEER:
            urgency = SteerUrgency(command.payload.get("urgency", SteerUrgency.PRIORITY))
            context = command.payload["context"]
            if urgency == SteerUrgency.CRITICAL:
                supervisor.background(
                    supervisor.steer(agent_id, context, urgency), f"steer:{agent_id}"
                )
                return True, "restarting with the steer"
            await supervisor.steer(agent_id, context, urgency)
            return True, "delivered"
        return False, f"unknown command {command.kind!r}"

    async def claim_agents(self) -> int:
        """Start agents requested through the web that no daemon runs yet."""
        records = await self.db(
            self.store.claim_pending_agents, host_id=self.host_id, limit=self.settings.claim_batch
        )
        for record in records:
            try:
                cls = self.registry.resolve(record.cls_path)
            except Exception as exc:
                await self._fail(record.id, str(exc))
                continue
            await self.supervisor.launch(record, cls)
        return len(records)

    async def schedule(self) -> int:
        """Start the queued executors that fit on this host's free GPUs now."""
        records = await self.db(
            self.store.claim_queue,
            host_id=self.host_id,
            policy=self.settings.scheduler_policy,
            shares=self.settings.queue_shares,
            slurm_slots=self._slurm_slots(),
            # Agents that run in this process are started with their claim (issue 25).
            started_pid=os.getpid(),
            started_classes=self._local_classes,
        )
        for record in records:
            if record.started_event is not None:
                await self.publish(record.started_event)
            try:
                cls = self.registry.resolve(record.cls_path)
            except Exception as exc:
                await self._fail(record.id, str(exc))
                continue
            await self.supervisor.launch(record, cls)
        await self.supervisor.tell_parents_of_finished_children()
        return len(records)

    def _slurm_slots(self) -> int:
        """How many more SLURM runs this daemon takes now (none without SLURM)."""
        if self.supervisor is None or self.supervisor.slurm_poller is None:
            return 0
        mine = sum(
            1 for h in self.supervisor.hosted.values() if h.record.config.get("backend") == "slurm"
        )
        return max(0, self.settings.slurm_max_jobs - mine)

    async def heartbeat(self) -> None:
        # Counted from the attempt: a failing database is retried at the heartbeat's pace,
        # not in a tight loop.
        self._last_beat = time.monotonic()
        if await self.db(self.store.record_heartbeat, host_id=self.host_id):
            await self.readopt_after_partition()
        self.compaction.when_due()
        if self._watch_gpus:
            try:
                await self.check_foreign_gpu_use()
            except Exception:  # nvidia-smi trouble must not cost the heartbeat
                logger.exception("could not check the GPUs for other processes")
        # After an outage every host's last heartbeat is old: give the others time to beat
        # again before judging them, or the first daemon back fails everyone's agents.
        if time.monotonic() - self._db_back_at < self.settings.dead_host_after:
            return
        for event in await self.db(
            self.store.declare_dead_hosts, stale_after=self.settings.dead_host_after
        ):
            await self.publish(event)

    async def readopt_after_partition(self) -> None:
        """This host was declared dead while its runagentd lived (cut off from the database):
        its runs were marked lost though they went on here. They say running again; one whose
        executor is gone meanwhile is re-adopted as after a restart."""
        logger.warning("%s had been declared dead; re-adopting its runs", self.settings.host_name)
        for event in await self.db(self.store.readopt_lost_runs, host_id=self.host_id):
            await self.publish(event)
            agent_id = event.get("agent_id", "")
            if agent_id in self.supervisor.hosted:
                continue
            record = await self.db(self.store.get_agent, agent_id=agent_id)
            try:
                cls = self.registry.resolve(record.cls_path)
            except Exception as exc:
                await self._fail(record.id, f"cannot re-adopt: {exc}")
                continue
            await self.supervisor.launch(record, cls, resume=True)

    async def check_foreign_gpu_use(self) -> list[int]:
        """Mark free GPUs that others' processes hold (so no run is started into an OOM);
        returns the indices whose state changed."""
        from agentsys.gpus import gpu_processes, holding_processes

        processes = await asyncio.to_thread(self._list_gpu_processes or gpu_processes)
        # A GPU allocated to one of our runs is ours whatever runs on it, so no pid
        # bookkeeping: the store only marks GPUs that are free when it looks.
        holding = holding_processes(processes, min_used_mb=self.settings.foreign_gpu_min_mb)
        held = [dataclasses.asdict(p) for p in holding]
        changed = await self.db(
            self.store.record_foreign_gpu_use, host_id=self.host_id, processes=held
        )
        if changed:
            logger.info(
                "GPUs %s of %s: held by other processes now %s",
                changed,
                self.settings.host_name,
                sorted({p["gpu_uuid"] for p in held}),
            )
        return changed

    def reap_orphans(self) -> int:
        """Reap descendants re-parented to us (we are a subreaper): shells whose worker died.
        Children someone awaits (the runs executors started here) are left to them."""
        return orphans.reap(keep=self._known_children)

    # -- the loop ---------------------------------------------------------------------------

    def request_stop(self) -> None:
        self._stopping.set()
        self.wake_all()

    def wake_all(self) -> None:
        """Wake the loop for a step that looks at everything."""
        self._news = None
        self._wake.set()

    def _heard(self, channel: str | None) -> None:
        if channel is None:
            self._news = None
        elif self._news is not None:
            self._news.add(channel)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)
        _become_subreaper()
        # Executors run here: their file reads, /proc scans and memory writes go to threads,
        # and memory writes wait out a database outage there. asyncio's default of
        # cpu_count + 4 threads would leave them none on a small host in an outage.
        loop.set_default_executor(
            ThreadPoolExecutor(max_workers=DEFAULT_THREADS, thread_name_prefix="agentsys-io")
        )
        listener = None
        try:
            await self.register()
            await self.start_supervisor()
            await self.reconcile()
            if self.supervisor.slurm_poller is not None:
                self.supervisor.background(
                    self.supervisor.slurm_poller.run(
                        self.settings.slurm_poll_interval, self._stopping
                    ),
                    "slurm-poller",
                )
            listener = asyncio.create_task(
                listen_for_work(self.settings.listen_dsn, self._wake, self._stopping, self._heard),
                name="listen",
            )
            while not self._stopping.is_set():
                news, self._news = self._news, set()
                await self._step(news)
                try:
                    await asyncio.wait_for(self._wake.wait(), self._sleep_seconds())
                except TimeoutError:
                    if self._poll_due():
                        self._news = None  # the fallback poll looks at everything
                self._wake.clear()
        finally:
            if listener is not None:
                listener.cancel()
            await self.shutdown()

    def _poll_due(self) -> bool:
        """Whether a wake with no news is the fallback poll's: one for the heartbeat alone
        beats and looks nowhere else (a host beating every 0.5 s would otherwise run every
        claim query twice a second while idle)."""
        return time.monotonic() - self._last_poll >= self._poll_seconds()

    def _poll_seconds(self) -> float:
        # Without LISTEN, the poll is all there is: keep it short.
        return self.settings.poll_interval if self.settings.listen_dsn else 1.0

    def _sleep_seconds(self) -> float:
        """Until a notification, the fallback poll, or the next heartbeat, whichever is first."""
        now = time.monotonic()
        next_poll = self._last_poll + self._poll_seconds() - now
        next_beat = self._last_beat + self.settings.heartbeat_interval - now
        return max(0.01, min(next_poll, next_beat))

    async def _step(self, news: set[str] | None = None) -> None:
        """One pass over the work; `news`: only what those NOTIFY channels announced (None:
        everything)."""
        # A failure must not kill the daemon: log it and try again on the next step. (A
        # database outage waits inside `db`; it ends a step only when the daemon stops.)
        if news is None:
            self._last_poll = time.monotonic()
        try:
            if news is None or COMMANDS_CHANNEL in news:
                await self.deliver_commands()
            # Queued runs before the rest: a run waits on nothing else here, and each step
            # before it is a round trip to the database (issue 22: ~8 ms of every start).
            if news is None or QUEUE_CHANNEL in news:
                await self.schedule()
            else:
                await self.supervisor.tell_parents_of_finished_children()
            if news is None or AGENTS_CHANNEL in news:
                await self.claim_agents()
                if self.chat_enabled:
                    await dispatch_turns(self)
            if time.monotonic() - self._last_beat >= self.settings.heartbeat_interval:
                await self.heartbeat()
        except StoreUnavailable:
            pass
        except Exception:
            logger.exception("daemon step failed; retrying")
        self.reap_orphans()

    async def shutdown(self) -> None:
        self.on_stopping()
        self.compaction.stop()
        if self.supervisor is not None:
            await self.supervisor.shutdown(self.settings.shutdown_grace)
            forkserver.stop()
        if self.host_id is not None:
            try:
                await self.db(self.store.mark_host_offline, host_id=self.host_id)
            except StoreUnavailable:  # its heartbeat stops: others will see it is gone
                logger.warning("could not mark host %s offline: no database", self.host_id)
        await self.live_events.flush(LIVE_FLUSH_SECONDS)
        loop = asyncio.get_running_loop()
        for thread in (self._stream_thread, self._db_thread):
            await loop.run_in_executor(thread, self.store.close)
            thread.shutdown(wait=True)
        logger.info("runagentd %s stopped", os.getpid())


async def _no_publish(event: dict) -> None:
    return None


def _become_subreaper() -> None:
    """Orphaned descendants (a shell whose worker was killed) are re-parented to runagentd,
    which reaps them, instead of lingering as zombies under an init that may not reap."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1)


def _kill_leftover_worker(record) -> None:
    """A worker of the previous runagentd may still be finishing: it leads its own process
    group, so kill that group, but only if its pid still names that very process. Pids wrap
    around (32768 of them by default): the pid alone may by now be anyone's process group, a
    user's shell or another runagentd's agent. A record with no start time names no one."""
    pid, started = record.pid, record.pid_start
    if not pid or started is None:
        return
    info = process_info(pid)
    if info is None or info.start_time != started:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
