"""Agent classes for runtime tests, one per role, driven by their config ("script").
They are allow-listed for test daemons through AGENTSYS_AGENT_CLASSES."""

from __future__ import annotations

import asyncio
import os
import signal

from agentsys.agent import Agent
from agentsys.types import AgentRole

MODULE = __name__


class Scripted(Agent):
    """config keys: wait_for_file (spawn nothing until it exists), children [{cls, goal,
    config}], try_spawn cls, shell, ignore_sigterm, ignore_stop, fail, ticks, forever (tick
    until stopped), tick, emit_ticks, wait_children."""

    async def run(self):
        cfg = self.config
        if cfg.get("resume"):
            self.emit_event("resumed", {"goal": self.goal})
        if cfg.get("ignore_sigterm"):
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if cfg.get("try_spawn"):
            try:
                await self.spawn_child(cfg["try_spawn"], "forbidden child")
                self.emit_event("spawn_allowed", {})
            except Exception as exc:
                self.emit_event("spawn_refused", {"error": str(exc), "type": type(exc).__name__})
        if cfg.get("wait_for_file"):
            while not os.path.exists(cfg["wait_for_file"]):
                await asyncio.sleep(0.05)
        for child in cfg.get("children", []):
            await self.spawn_child(
                child["cls"],
                child.get("goal", "child"),
                child.get("config", {}),
                **child.get("scope", {}),
            )
        if cfg.get("shell"):
            shell = await asyncio.create_subprocess_shell(cfg["shell"])
            self.emit_event("shell", {"pid": shell.pid})
        if cfg.get("fail"):
            raise RuntimeError(cfg["fail"])
        ticks = await self._tick(cfg)
        if cfg.get("wait_children"):
            results = {}
            for handle in list(self.children.values()):
                status = await handle.wait()
                results[handle.id] = str(status)
                self.emit_event(
                    "child_result",
                    {"child_id": handle.id, "status": str(status), "error": handle.error},
                )
            return {"ticks": ticks, "children": results}
        return {"ticks": ticks}

    async def _tick(self, cfg) -> int:
        count, limit, forever = 0, cfg.get("ticks", 0), cfg.get("forever", False)
        while forever or count < limit:
            await self.check_pause()
            steer = self.consume_steer()
            if steer:
                self.emit_event("steer_seen", {"context": steer})
            count += 1
            if cfg.get("emit_ticks"):
                self.emit_event("tick", {"i": count})
            try:
                await asyncio.sleep(cfg.get("tick", 0.05))
            except asyncio.CancelledError:
                if not cfg.get("ignore_stop"):
                    raise
        return count


class TestSession(Scripted):
    """L1: runs inside runagentd."""

    role = AgentRole.ORCHESTRATOR
    allowed_children = frozenset({AgentRole.ORCHESTRATOR, AgentRole.EXECUTOR, AgentRole.SIDECAR})
    hosting = "local"


class TestResearch(Scripted):
    role = AgentRole.ORCHESTRATOR
    allowed_children = frozenset({AgentRole.EXECUTOR, AgentRole.SIDECAR})


class ResumableResearch(TestResearch):
    resumable = True


class MonitoredResearch(TestResearch):
    monitor_interval = 0.05

    async def on_monitor(self):
        self.emit_event("monitored", {})
        if self.config.get("monitor_raises"):
            raise ValueError("monitor broke")


class TestExecutor(Scripted):
    role = AgentRole.EXECUTOR
    allowed_children = frozenset({AgentRole.SIDECAR})


class TestSidecar(Scripted):
    role = AgentRole.SIDECAR
    allowed_children = frozenset()


ALL = ",".join(
    f"{MODULE}.{name}"
    for name in (
        "TestSession",
        "TestResearch",
        "ResumableResearch",
        "MonitoredResearch",
        "TestExecutor",
        "TestSidecar",
    )
)
