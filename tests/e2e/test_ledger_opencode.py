"""Issue 38 §1 against the real OpenCode and the demo model: a prompt's paid steps carry
non-zero tokens and cost (the demo model reports usage, the demo provider has a price), and
recorded twice they are one ledger entry each."""

import asyncio
import json
import secrets
import time

import pytest

from agentsys.opencode.client import OpenCodeClient
from agentsys.scripted_llm.server import usage_of
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


def test_no_session_makes_a_model_call_the_ledger_misses(opencode_server, scripted_llm):
    """Issue 38 §1, title generation: OpenCode 1.18.33 titles an untitled session with a side
    call to the model whose usage it keeps nowhere (SessionPrompt.ensureTitle keeps only the
    text: no message, part, step or session total has it). A loop's session is titled when it
    is made (OpenCodeGateway.ensure_session), and so is a chat's (provisionally, by its first
    message: SessionAgent._ask), so OpenCode makes no such call for either: every model call
    is a step it reports. The chat's title is written by AgentSys itself (agentsys.chat.titles),
    in a titled side session, a step with its tokens and cost like any other."""
    from agentsys.chat.titles import ask_title, provisional_title, side_title
    from agentsys.opencode.server import DEMO_MODEL, DEMO_PROVIDER
    from agentsys.research.llm import OpenCodeGateway
    from agentsys.scripted_llm.server import is_title_call

    def prompt_tokens(bodies: list[dict]) -> int:  # as the demo model reports them
        return sum(usage_of(body, "")["prompt_tokens"] for body in bodies)

    def calls_of(mark: str) -> tuple[list[dict], list[dict]]:
        mine = [body for body in scripted_llm.requests if mark in json.dumps(body)]
        return [b for b in mine if not is_title_call(b)], [b for b in mine if is_title_call(b)]

    loop_mark = f"loop-{secrets.token_hex(6)}"
    workdir = str(opencode_server.process.workdir)
    gateway = OpenCodeGateway(
        url=opencode_server.url,
        provider=DEMO_PROVIDER,
        model=DEMO_MODEL,
        workdir=workdir,
        title="Research loop orchestrator-title",
        password=opencode_server.password,
    )

    async def loop_prompt():
        try:
            session = await gateway.ensure_session("")
            return await gateway.ask(session, f"Say hello ({loop_mark}).")
        finally:
            await gateway.aclose()

    reply = asyncio.run(loop_prompt())
    steps, titles = calls_of(loop_mark)
    assert reply.steps and len(steps) == len(reply.steps)
    assert titles == []
    assert sum(s["input_tokens"] for s in reply.steps) == prompt_tokens(steps)

    # A chat: its session titled as the L1 agent titles it, then its title written.
    message = f"What is chat-{secrets.token_hex(6)} about?"
    chat = _prompt_text(opencode_server, workdir, message, title=provisional_title(message))
    time.sleep(1.0)  # OpenCode's own title call, had it made one, came with the prompt
    steps, titles = calls_of(message.split()[2])
    assert len(steps) == len(chat.steps) and titles == []
    assert sum(s["input_tokens"] for s in chat.steps) == prompt_tokens(steps)

    async def write_title():
        client = OpenCodeClient(opencode_server.url, password=opencode_server.password)
        try:
            side = await client.create_session(workdir, title=side_title("chat-e2e"))
            written = await ask_title(
                client, side, message, directory=workdir, model=(DEMO_PROVIDER, DEMO_MODEL)
            )
            await client.delete_session(side, workdir)
            return written, await client.sessions(workdir)
        finally:
            await client.aclose()

    written, left = asyncio.run(write_title())
    steps, titles = calls_of(message.split()[2])
    assert len(titles) == 1 and len(steps) == len(chat.steps)  # the title: one call, ours
    assert written.error == "" and written.text == message.rstrip("?").capitalize()
    [step] = written.steps  # reported: to the token, at the demo model's price
    assert step["key"].startswith("title:prt_") and step["usd"] > 0
    assert step["input_tokens"] == prompt_tokens(titles) and step["output_tokens"] > 0
    assert side_title("chat-e2e") not in [s.get("title") for s in left]  # deleted


def _prompt_text(opencode_server, directory: str, text: str, title: str | None = None):
    async def one_prompt():
        client = OpenCodeClient(opencode_server.url, password=opencode_server.password)
        try:
            session_id = await client.create_session(directory=directory, title=title)
            return await client.prompt(
                session_id,
                text,
                provider=opencode_server.provider,
                model=opencode_server.model,
                directory=directory,
            )
        finally:
            await client.aclose()

    return asyncio.run(one_prompt())
