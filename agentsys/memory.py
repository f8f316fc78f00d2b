"""What an agent writes to memory and alerts, as seen from the runtime (no Django here).

`AgentMemory` is bound to one agent and fills in its id, role and scope. Its methods are
synchronous (they hit the database); agents call them through `Agent.remember` and
`Agent.alert`, which run them off the event loop."""

from __future__ import annotations

import importlib
from typing import Protocol


class AgentMemory(Protocol):
    def write(self, *, type: str, data: dict, tags: list[str] | None = None) -> str: ...

    def raise_alert(
        self, *, severity: str, message: str, signature: str, data: dict, run_dir: str = ""
    ) -> str: ...


def load_memory_factory(path: str):
    """`module:attr` → a callable(agent_id, role, scope_dict) -> AgentMemory."""
    module_name, _, attr = path.partition(":")
    return getattr(importlib.import_module(module_name), attr)
