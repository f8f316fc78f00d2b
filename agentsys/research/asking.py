"""One prompt to the research loop's model: held while a budget cap is reached
(agentsys.research.budget), aborted by a pause and asked again on resume, its paid steps sent
to the ledger, and a failure recorded with what to check (agentsys.research.model_trouble)
and asked again after a wait; the loop fails after `max_model_failures` in a row."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from agentsys.research import budget
from agentsys.research.llm import ModelReply, OpenCodeError
from agentsys.research.logbook import model_error_section
from agentsys.research.model_trouble import failed_call

logger = logging.getLogger("agentsys.research")


class ResearchFailed(Exception):
    pass


async def steps_read_back(agent: Any) -> None:
    """A resumed loop's paid steps that its last runagentd may never have written to the
    ledger (killed between the reply and its `model_steps` event): read back from its
    OpenCode session by the same keys, so a step already recorded stays one entry. Best
    effort: the ledger must not cost the loop its resume."""
    session = agent.state.opencode_session_id
    if not session:
        return
    try:
        steps = await agent.gateway.session_steps(session)
    except (OpenCodeError, AttributeError) as error:
        logger.warning("%s: the steps of %s not read back: %s", agent.id, session, error)
        return
    if steps:
        agent.emit_event("model_steps", {"steps": steps, "skill": "read back on resume"})


async def ask(agent: Any, skill: str, variables: dict) -> ModelReply | None:
    """The model's reply; None when it failed (recorded; the caller's step fails), or
    ResearchFailed after too many failures in a row."""
    await budget.hold_at_cap(agent, "its next model call")
    prompt = agent.skills.render(skill, variables)
    state = agent.state
    try:
        state.opencode_session_id = await agent.gateway.ensure_session(state.opencode_session_id)
        # A pause while the model thinks aborts the prompt, and asks again on resume.
        reply = await agent.interruptible(
            lambda: agent.gateway.ask(state.opencode_session_id, prompt)
        )
    except OpenCodeError as error:
        await _failed(agent, skill, error)
        return None
    state.consecutive_model_failures = 0
    if reply.steps:  # the ledger's entries (runtime_app records them with this event)
        agent.emit_event("model_steps", {"steps": reply.steps, "skill": skill})
        budget.add_model_steps(state, reply.steps)
    return reply


async def _failed(agent: Any, skill: str, error: OpenCodeError) -> None:
    """Record the failed call and what to check, then wait before the step is asked again;
    ResearchFailed after `max_model_failures` in a row."""
    record = failed_call(agent.state, agent.settings, error)
    tries, advice = agent.state.consecutive_model_failures, record.errors[-1]
    logger.warning("%s: model: %s (%s)", agent.id, error, advice)
    agent.emit_event(
        "model_error", {"error": str(error), "advice": advice, "skill": skill, "try": tries}
    )
    agent.workspace.append_log(model_error_section(record))
    agent._save()
    if tries >= agent.settings.max_model_failures:
        raise ResearchFailed(
            f"the model failed {tries} times in a row; last: {error} ({advice})"
        ) from None
    await asyncio.sleep(agent.settings.pause_seconds * tries)
