"""The person's commands to a running subtree, as the supervisor carries them out: the stop
cascade (leaves first, then SIGTERM/SIGKILL for what will not stop), pause/resume, the three
steer tiers, and the daemon's own shutdown."""

from __future__ import annotations

import asyncio
import logging
import signal

from agentsys.hosted import signal_group, wait_set
from agentsys.ipc import Cmd
from agentsys.proctree import RunProcesses
from agentsys.types import AgentStatus, SteerUrgency

logger = logging.getLogger("agentsys.supervisor")

KILL_WAIT_SECONDS = 2.0  # after SIGTERM, before SIGKILL


class SupervisorControls:
    """Mixed into Supervisor: uses its store, db, publish, hosted, spawn and send_to."""

    async def stop(self, agent_id: str) -> list[str]:
        """Stop an agent and everything under it, leaves first. Returns the stopped ids."""
        levels = await self.db(self.store.live_descendant_levels, agent_id=agent_id)
        stopped: list[str] = []
        for level in [*levels, [agent_id]]:
            await asyncio.gather(*(self._stop_one(i) for i in level))
            stopped.extend(level)
        # Stored without publishing, like every event runagentd writes: publish them here, or
        # live clients would see them only with the next event (or a keepalive, 15 s later).
        for event in await self.db(self.store.cancel_queued_requests, parent_ids=stopped):
            await self.publish(event)
        return stopped

    async def _stop_one(self, agent_id: str) -> None:
        hosted = self.hosted.get(agent_id)
        if hosted is None:
            await self._stop_unhosted(agent_id)
            return
        hosted.stop_requested = True
        grace = float(hosted.record.config.get("stop_grace", self.stop_grace))
        if hosted.local is not None:
            await hosted.local.stop()
            if not await wait_set(hosted.exited, grace):
                # Nothing to kill but its work: an executor's run ends here, so its GPUs are
                # not released while it still runs on them.
                logger.error("%s did not stop within %ss", agent_id, grace)
                await hosted.cls.end_leftovers(hosted.id, hosted.record.config)
            return
        session = RunProcesses.session_of(hosted.pid)  # named while its leader lives
        hosted.send({"t": Cmd.STOP})
        if not await wait_set(hosted.exited, grace):
            # Its work (an executor's run, in a session of its own) ends first: once the
            # worker is gone its end is recorded and its GPUs go to the next run.
            await hosted.cls.end_leftovers(hosted.id, hosted.record.config)
            await self._kill_worker(hosted)
        # The worker gone is not enough: a shell it started may ignore SIGTERM.
        if survivors := await session.terminate(grace=KILL_WAIT_SECONDS):
            logger.error("%s: processes %s survived SIGKILL", agent_id, survivors)

    async def _kill_worker(self, hosted) -> None:
        for sig, wait_for in ((signal.SIGTERM, KILL_WAIT_SECONDS), (signal.SIGKILL, 5.0)):
            signal_group(hosted.pid, sig)
            if await wait_set(hosted.exited, wait_for):
                return
        logger.error("%s (pid %s) survived SIGKILL", hosted.id, hosted.pid)

    async def _stop_unhosted(self, agent_id: str) -> None:
        """Not running here (queued, or its runagentd died): make sure its row does not
        claim otherwise, and that no process of its work on this machine outlives that."""
        record = await self.db(self.store.get_agent, agent_id=agent_id)
        try:
            cls = self.registry.resolve(record.cls_path)
        except Exception:  # no longer allow-listed: it has nothing here to end
            cls = None
        if cls is not None:
            await cls.end_leftovers(agent_id, record.config)
        event = await self.db(self.store.mark_stopped, agent_id=agent_id)
        if event is not None:
            await self.publish(event)

    async def end_work_of(self, hosted, *, ended_itself: bool = False) -> None:
        """An agent's end is about to be recorded: what it started must not outlive that.
        An executor's run (in a session of its own) ends here if its worker did not end it;
        a worker that died (killed, crashed) ended none of the shells in its session.
        `ended_itself`: an agent inside runagentd that finished (done) ended its work."""
        if hosted.process is None:
            if hosted.local is not None and not ended_itself:
                # An agent inside runagentd that failed may have left its work running.
                await hosted.cls.end_leftovers(hosted.id, hosted.record.config)
            return
        await hosted.cls.end_leftovers(hosted.id, hosted.record.config)
        if hosted.process.exitcode is not None:
            # Named by its start too: its pid may already be another process's.
            session = RunProcesses(marker="", leader=hosted.pid, leader_start=hosted.pid_start)
            if survivors := await session.terminate(grace=0):
                logger.error("%s: processes %s survived SIGKILL", hosted.id, survivors)

    async def pause(self, agent_id: str, *, resume: bool = False) -> list[str]:
        """Pause (or resume) an agent and its descendants that are still live."""
        if resume and (hosted := self.hosted.get(agent_id)) is not None:
            hosted.paused = False  # a late-children cascade still on its way stands down
        levels = await self.db(self.store.live_descendant_levels, agent_id=agent_id)
        touched = []
        for target in [agent_id, *[i for level in levels for i in level]]:
            if self.send_to(target, {"t": Cmd.RESUME if resume else Cmd.PAUSE}):
                touched.append(target)
        return touched

    async def pause_late_children(self, hosted) -> None:
        """An agent said it paused: pause its descendants again. A child it spawned while
        the pause was on its way was not live when the pause cascaded, and a paused loop
        must have nothing of its own running. Those already paused ignore it."""
        levels = await self.db(self.store.live_descendant_levels, agent_id=hosted.id)
        if not hosted.paused:  # resumed meanwhile
            return
        for target in [i for level in levels for i in level]:
            self.send_to(target, {"t": Cmd.PAUSE})

    async def steer(self, agent_id: str, context: str, urgency: SteerUrgency) -> str:
        """PRIORITY: into the running agent's buffer. CRITICAL: stop the subtree and respawn
        the same class with the steer in its goal; returns the id that now does the work."""
        if urgency == SteerUrgency.PRIORITY:
            self.send_to(agent_id, {"t": Cmd.STEER, "context": context, "urgency": urgency})
            await self._record(agent_id, "steered", {"urgency": str(urgency), "context": context})
            return agent_id
        old = await self.db(self.store.get_agent, agent_id=agent_id)
        hosted = self.hosted.get(agent_id)
        if hosted is not None:
            hosted.superseded = True
        await self.stop(agent_id)
        new_id = await self.spawn(
            cls_path=old.cls_path,
            goal=f"{old.goal} [STEER: {context}]",
            parent_id=old.parent_id,
            config=old.config,
            scope=old.scope,
            chat_session_id=old.chat_session_id,
        )
        await self.publish(
            await self.db(self.store.supersede, old_id=agent_id, new_id=new_id, context=context)
        )
        if old.parent_id:
            self.send_to(
                old.parent_id,
                {
                    "t": Cmd.CHILD_STATUS,
                    "child_id": agent_id,
                    "status": str(AgentStatus.RUNNING),
                    "replaced_by": new_id,
                },
            )
        return new_id

    async def shutdown(self, grace: float) -> None:
        """runagentd is stopping: end every agent within `grace` seconds. Resumable agents
        are killed with their rows left live, so the next runagentd resumes them; the rest
        are stopped."""
        # Named while each leader lives; a resumable agent's run is in a session of its
        # own, so it is not among these and is left for the next runagentd.
        sessions = [RunProcesses.session_of(h.pid) for h in self.hosted.values()]
        for hosted in list(self.hosted.values()):
            if hosted.cls.resumable and hosted.process is not None:
                hosted.leave_row = True
                signal_group(hosted.pid, signal.SIGKILL)
            elif hosted.cls.resumable and hosted.local is not None:
                # A chat's L1 agent, an executor: its row stays live, so the next runagentd
                # resumes it (the chat still reports the research it started; the executor
                # re-adopts its run, which goes on meanwhile: detached, it is not killed).
                hosted.leave_row = True
                await hosted.local.detach()
            elif hosted.channel is not None:
                hosted.stop_requested = True
                hosted.channel.send({"t": Cmd.STOP})
            elif hosted.local is not None:
                hosted.stop_requested = True
                await hosted.local.stop()
        await asyncio.gather(*(wait_set(h.exited, grace) for h in self.hosted.values()))
        for hosted in list(self.hosted.values()):
            signal_group(hosted.pid, signal.SIGKILL)
        await asyncio.gather(*(wait_set(h.exited, 1.0) for h in self.hosted.values()))
        # Shells the workers started that ignored the signals their worker got.
        await asyncio.gather(*(session.terminate(grace=0) for session in sessions))
        await self.spare.close()
