"""How the runtime gives an agent its ports: its memory (`agent.memory`, an
agentsys.memory.MemoryView) and its runs (`agent.runs`, an agentsys.run_port.RunPort).

Both are built the same way, wherever the agent runs (inside runagentd or in a worker
process), from a "module:attr" path to a callable(agent_id, role, scope_dict): a path and
not the callable, because a worker gets it in its WorkerSpec and imports it itself. An
empty path leaves that port off (None): the agent runs without it, as in plain tests."""

from __future__ import annotations

import importlib


def load_factory(path: str):
    """`module:attr` → the callable it names."""
    module_name, _, attr = path.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def wire_ports(
    agent, *, memory_factory: str, run_port_factory: str, role: str, scope: dict
) -> None:
    """Set `agent.memory` and `agent.runs` from their factories, for `agent.id`."""
    if memory_factory:
        agent.memory = load_factory(memory_factory)(agent.id, role, scope)
    if run_port_factory:
        agent.runs = load_factory(run_port_factory)(agent.id, role, scope)
