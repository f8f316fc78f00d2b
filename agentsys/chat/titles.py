"""A chat's title, written by a model step the ledger records (issue 38 §1).

OpenCode (1.18.33) titles an untitled session by itself, with a side call to its small model
whose usage it keeps nowhere (SessionPrompt.ensureTitle): no event, message or part has its
tokens. So a chat's OpenCode session is made with a provisional title (the person's first
message), which OpenCode never replaces, and AgentSys asks for the real title itself: in a
side session of its own, titled too (so it makes no such call either), through OpenCode's own
title agent (its title prompt, no tools). The side prompt's `step-finish` parts are recorded
like a turn's steps, keyed `title:<part id>`; the side session is deleted only once they are
recorded, so one still there after a restart holds steps to record (`recover_titles`).

Never in a reply's way: it runs beside the first turn, and a failure (a model error, no
answer within TITLE_TIMEOUT_S) leaves the provisional title and is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentsys.chat.store import ChatLink
from agentsys.opencode import OpenCodeError
from agentsys.opencode.events import steps_of_messages

if TYPE_CHECKING:  # importing the client imports httpx, which a daemon with no chat never uses
    from agentsys.opencode import OpenCodeClient

logger = logging.getLogger("agentsys.session")

TITLE_CHARS = 50  # a provisional title: the first message, cut here
TITLE_MAX = 100  # a written one, cut as OpenCode cuts its own
TITLE_TIMEOUT_S = 60.0
MESSAGE_CHARS = 4000  # what the title is written from: the start of a long message is enough
TITLE_AGENT = "title"  # OpenCode's own hidden agent: its title prompt ("title generator")
KEY_PREFIX = "title:"  # its ledger entries: "llm:title:prt_…"
# As OpenCode words its own title request; the person's message marked as a chat prompt marks
# it (the scripted LLM titles a request from the text after its last "[USER] ").
PROMPT = "Generate a title for this conversation:\n\n[USER] {message}"


def provisional_title(message: str) -> str:
    """The person's first message on one line, cut to TITLE_CHARS."""
    line = " ".join(message.split())
    return line[:TITLE_CHARS] + "..." if len(line) > TITLE_CHARS else line


def side_title(chat_session_id: str) -> str:
    """The side session's own title: names its chat, so a restart finds it again."""
    return f"AgentSys: the title of chat {chat_session_id}"


def clean_title(text: str) -> str:
    """The first line the model wrote, without its thinking or wrapping quotes."""
    text = re.sub(r"<think>[\s\S]*?</think>\s*", "", text)
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line = re.sub(r"^(title:\s*)", "", line, flags=re.IGNORECASE).strip("\"'`*# ").strip()
    return line[: TITLE_MAX - 3] + "..." if len(line) > TITLE_MAX else line


@dataclass(frozen=True)
class WrittenTitle:
    text: str  # '' when none came
    steps: list = field(default_factory=list)  # its paid steps, keyed for the ledger
    error: str = ""


def read_answer(messages: list, error: str = "") -> WrittenTitle:
    """What the side session holds: the title its model wrote, and its paid steps."""
    texts = []
    for message in messages if isinstance(messages, list) else []:
        info = message.get("info") if isinstance(message, dict) else None
        if not isinstance(info, dict) or info.get("role") != "assistant":
            continue
        if isinstance(info.get("error"), dict) and not error:
            data = info["error"].get("data")
            error = str((data or {}).get("message") or info["error"].get("name") or "failed")
        for part in message.get("parts") or []:
            if isinstance(part, dict) and part.get("type") == "text":
                texts.append(str(part.get("text") or ""))
    steps = [
        {**step, "key": KEY_PREFIX + step["key"]}
        for step in steps_of_messages(messages)
        if step.get("key")
    ]
    text = clean_title("\n".join(texts))
    return WrittenTitle(text=text, steps=steps, error=error or ("" if text else "no title"))


async def ask_title(
    client: OpenCodeClient,
    side: str,
    message: str,
    *,
    directory: str,
    model: tuple[str, str],
    timeout: float = TITLE_TIMEOUT_S,
) -> WrittenTitle:
    """Ask for the title in side session `side`, by OpenCode's small model if it names one
    (as it would write its own), else the chat's `model` (provider, model id)."""
    error = ""
    try:
        with contextlib.suppress(OpenCodeError):
            model = await client.small_model(directory) or model
        await asyncio.wait_for(
            client.message(
                side,
                PROMPT.format(message=message.strip()[:MESSAGE_CHARS]),
                provider=model[0],
                model=model[1],
                agent=TITLE_AGENT,
                directory=directory,
            ),
            timeout,
        )
    except TimeoutError:
        error = f"no title within {timeout:g} s"
    except OpenCodeError as failure:
        error = str(failure)
    if error:
        await client.abort(side, directory)  # what it paid for so far is read back below
    return read_answer(await client.messages(side, directory), error)


async def title_chat(
    chat: ChatLink,
    client: OpenCodeClient,
    *,
    session_id: str,
    message: str,
    directory: str,
    model: tuple[str, str],
    opencode_session: str,
) -> None:
    """Write chat `session_id`'s title from its first `message`. Never raises."""
    try:
        side = await client.create_session(directory, title=side_title(session_id))
        written = await ask_title(client, side, message, directory=directory, model=model)
        await _settle(chat, client, session_id, side, written, directory, opencode_session)
    except Exception:  # the provisional title stays; the chat goes on
        logger.exception("the title of chat %s was not written", session_id)


async def recover_titles(
    chat: ChatLink,
    client: OpenCodeClient,
    *,
    session_id: str,
    directory: str,
    opencode_session: str,
) -> None:
    """A side session left by a runagentd that stopped before it recorded its steps: record
    them now (by the same keys: a step recorded already stays one entry). Never raises."""
    try:
        for found in await client.sessions(directory):
            if isinstance(found, dict) and found.get("title") == side_title(session_id):
                side = str(found.get("id") or "")
                await client.abort(side, directory)  # its prompt may still run for nobody
                written = read_answer(await client.messages(side, directory))
                await _settle(chat, client, session_id, side, written, directory, opencode_session)
    except Exception:
        logger.exception("the title sessions of chat %s were not looked for", session_id)


async def _settle(chat, client, session_id, side, written, directory, opencode_session) -> None:
    """Record the steps and set the title (one transaction), then tidy OpenCode up."""
    await chat.publish_all(
        await chat.db(
            chat.store.record_title,
            session_id=session_id,
            title="" if written.error else written.text,  # half a title is none
            steps=written.steps,
        )
    )
    if written.error:
        logger.warning("chat %s keeps its provisional title: %s", session_id, written.error)
    with contextlib.suppress(OpenCodeError):
        if written.text and not written.error and opencode_session:
            await client.set_title(opencode_session, written.text, directory)
        await client.delete_session(side, directory)
