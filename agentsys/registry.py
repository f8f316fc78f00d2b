"""Which agent classes may be spawned. A class path from a request, an LLM reply or a worker
is looked up here and nowhere else, so nothing outside the list is ever imported."""

from __future__ import annotations

import importlib

# The product's own agents, one name each: L1 chat session agent, L2 research loop, L3
# executor. Everything else says these names; a stored row's cls_path is one of them.
SESSION_AGENT = "agentsys.agents.session.SessionAgent"
RESEARCH_AGENT = "agentsys.agents.research.ResearchAgent"
EXECUTOR_AGENT = "agentsys.agents.executor.ExecutorAgent"
BUILTIN_AGENT_CLASSES: frozenset[str] = frozenset({SESSION_AGENT, RESEARCH_AGENT, EXECUTOR_AGENT})


class DisallowedAgentClass(Exception):
    pass


class AgentClassRegistry:
    def __init__(self, extra: frozenset[str] | set[str] = frozenset()):
        self.allowed = frozenset(BUILTIN_AGENT_CLASSES | set(extra))

    def resolve(self, cls_path: str):
        if cls_path not in self.allowed:
            raise DisallowedAgentClass(
                f"{cls_path!r} is not an allowed agent class "
                f"(allowed: {', '.join(sorted(self.allowed)) or 'none'})"
            )
        module_name, _, attr = cls_path.rpartition(".")
        cls = getattr(importlib.import_module(module_name), attr)
        from agentsys.agent import Agent

        if not (isinstance(cls, type) and issubclass(cls, Agent)):
            raise DisallowedAgentClass(f"{cls_path!r} is not an Agent subclass")
        return cls
