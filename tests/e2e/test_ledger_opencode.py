"""Issue 38 §1 against the real OpenCode and the demo model: a prompt's paid steps carry
non-zero tokens and cost (the demo model reports usage, the demo provider has a price), and
recorded twice they are one ledger entry each."""

import asyncio

import pytest

from agentsys.opencode.client import OpenCodeClient


def _prompt(opencode_server, directory: str):
    async def one_prompt():
        client = OpenCodeClient(opencode_server.url, password=opencode_server.password)
        try:
            session = await client.create_session(directory=directory)
            return await client.prompt(
                session,
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
