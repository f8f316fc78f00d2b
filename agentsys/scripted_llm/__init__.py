"""The project's own OpenAI-compatible model: scripted per test, or the demo brain."""

from agentsys.scripted_llm.server import ScriptedLLM

__all__ = ["ScriptedLLM"]
