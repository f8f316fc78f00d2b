"""Agents used by the benchmarks (allow-listed for the bench daemon only)."""

import asyncio
import time

from agentsys.agent import Agent
from agentsys.types import AgentRole


class Quick(Agent):
    """Starts and finishes at once: measures spawn cost, nothing else."""

    role = AgentRole.ORCHESTRATOR
    allowed_children = frozenset({AgentRole.EXECUTOR})

    async def run(self):
        return None


class Emitter(Agent):
    """Emits `count` events `interval` seconds apart, each stamped with its wall-clock time."""

    role = AgentRole.ORCHESTRATOR

    async def run(self):
        await asyncio.sleep(self.config.get("delay", 0.5))
        for i in range(self.config.get("count", 100)):
            self.emit_event("bench", {"i": i, "t": time.time()})
            await asyncio.sleep(self.config.get("interval", 0.02))
