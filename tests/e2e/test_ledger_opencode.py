"""Issue 38 §1 against the real OpenCode and the demo model: a prompt's paid steps carry
non-zero tokens and cost (the demo model reports usage, the demo provider has a price), and
recorded twice they are one ledger entry each."""

import asyncio

import pytest

from agentsys.opencode.client import OpenCodeClient
from ledger_app.models import SpendEntry
from ledger_app.services import record_llm_steps


def _prompt(opencode_server, directory: str):
    return _prompt_in(opencode_server, directory, None)


def _prompt_in(opencode_server, directory: str, session: str | None):
    async def one_prompt():
        client = OpenCodeClient(opencode_server.url, password=opencode_server.password)
        try:
            session_id = session or await client.create_session(directory=directory)
            return await client.prompt(
                session_id,
                "Say hello.",
                provider=opencode_server.provider,
                model=opencode_server.model,
                directory=directory,
            )
        finally:
            await client.aclose()

    return asyncio.run(one_prompt())


@pytest.mark.django_db
def test_a_real_prompts_steps_cost_tokens_and_money_once(opencode_server, tmp_path):
    from ledger_app import selectors
    from ledger_app.models import SpendEntry
    from ledger_app.services import record_llm_steps

    result = _prompt(opencode_server, str(tmp_path))
    assert result.steps, "OpenCode reported no step-finish"
    for step in result.steps:
        print("step:", step)
        assert step["key"].startswith("prt_")
        assert step["input_tokens"] > 0 and step["output_tokens"] > 0
        assert step["usd"] > 0
        assert (step["provider"], step["model"]) == (
            opencode_server.provider,
            opencode_server.model,
        )
    record_llm_steps(steps=result.steps, chat_session_id="chat-e2e")
    record_llm_steps(steps=result.steps, chat_session_id="chat-e2e")
    assert SpendEntry.objects.count() == len(result.steps)
    total = selectors.totals(SpendEntry.objects.all())
    assert total["llm_usd"] == pytest.approx(sum(s["usd"] for s in result.steps), abs=1e-8)


def _session_steps(opencode_server, session: str, directory: str):
    async def read_back():
        client = OpenCodeClient(opencode_server.url, password=opencode_server.password)
        try:
            return await client.session_steps(session, directory)
        finally:
            await client.aclose()

    return asyncio.run(read_back())


@pytest.mark.django_db
def test_steps_a_killed_daemon_never_wrote_are_read_back_once(opencode_server, tmp_path):
    """runagentd SIGKILLed between a paid step and its ledger row: the next turn reads the
    OpenCode session's steps back (agents.session._record_lost_steps), by the same keys as the
    prompt's stream gave them: the lost step is recorded, and one written already is not
    doubled."""
    from runtime_app.chat_store import DjangoChatStore

    first = _prompt(opencode_server, str(tmp_path))
    second = _prompt_in(opencode_server, str(tmp_path), first.session_id)
    assert first.steps and second.steps
    read_back = _session_steps(opencode_server, first.session_id, str(tmp_path))
    assert read_back == first.steps + second.steps  # same keys, tokens, cost, model
    # The first turn's steps were written with its close; the second's died with the daemon.
    record_llm_steps(steps=first.steps, chat_session_id="chat-e2e", chat_turn_id="turn-1")
    store = DjangoChatStore()
    store.record_session_steps(session_id="chat-e2e", steps=read_back)
    store.record_session_steps(session_id="chat-e2e", steps=read_back)  # and again: no more
    keys = {s["key"] for s in read_back}
    assert SpendEntry.objects.count() == len(keys) == len(first.steps) + len(second.steps)
    turns = set(SpendEntry.objects.values_list("chat_turn_id", flat=True))
    assert turns == {"turn-1", ""}  # the written ones keep their turn
