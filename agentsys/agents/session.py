"""SessionAgent (L1): the LLM behind a chat session, one per session, inside
runagentd. It answers each turn through OpenCode, streaming the answer into the session's
event stream, then carries out the action tags of the answer (spawn research or a command,
steer or stop a child) as the turn's mode allows. When one of its children ends, it starts a
synthetic turn reporting the results by itself; turns run one at a time, in order, so a
report never cuts into a reply.

The runtime hands it a ChatLink (agentsys.chat.store) before it starts: the chat store and
how to call it. All it knows of the database and the web is that store.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from pathlib import Path

from agentsys.agent import Agent
from agentsys.chat import actions as tags
from agentsys.chat import titles
from agentsys.chat.prompt import build_prompt
from agentsys.chat.relay import TurnRelay
from agentsys.chat.reports import child_report_message
from agentsys.chat.store import ChatLink, TurnContext, TurnOutcome
from agentsys.chat.titles import provisional_title
from agentsys.opencode import OpenCodeClient, OpenCodeError
from agentsys.registry import EXECUTOR_AGENT
from agentsys.research import tool_token
from agentsys.research.settings import DEFAULT_SKILLS_DIR, ResearchSettings
from agentsys.skills import PromptSkills, SkillNotFound
from agentsys.types import AgentRole, AgentStatus

logger = logging.getLogger("agentsys.session")

ABORT_SETTLE_S = 0.3  # OpenCode is idle ~20 ms after an abort: ample margin


class SessionAgent(Agent):
    role = AgentRole.ORCHESTRATOR
    allowed_children = frozenset(
        {AgentRole.RESEARCH, AgentRole.ORCHESTRATOR, AgentRole.EXECUTOR, AgentRole.SIDECAR}
    )
    hosting = "local"
    resumable = True

    def __init__(self) -> None:
        super().__init__()
        self.chat: ChatLink | None = None
        self._turns: asyncio.Queue[str] = asyncio.Queue()
        self._known_turns: set[str] = set()
        self._current: tuple[str, asyncio.Task] | None = None
        self._stopping_turn = ""
        self._reported: set[str] = set()
        self._titles_checked = False  # a title's side session left by a restart looked for

    def attach_chat(self, chat: ChatLink) -> None:
        self.chat = chat

    # -- what the runtime calls -------------------------------------------------------------

    def submit_turn(self, turn_id: str) -> None:
        if turn_id not in self._known_turns:
            self._known_turns.add(turn_id)
            self._turns.put_nowait(turn_id)

    def stop_turn(self, turn_id: str) -> bool:
        if self._current is None or self._current[0] != turn_id:
            return False
        self._stopping_turn = turn_id
        self._current[1].cancel()
        return True

    @property
    def busy(self) -> bool:
        return self._current is not None or not self._turns.empty()

    # -- the loop ---------------------------------------------------------------------------

    async def on_start(self) -> None:
        if self.chat is None:
            raise RuntimeError("SessionAgent needs a chat store (it runs only inside runagentd)")
        self.session_id = str(self.config["chat_session_id"])
        self.settings = ResearchSettings.from_config(self.config, self.deployment)
        self.skills = PromptSkills(self.config.get("skills_dir") or DEFAULT_SKILLS_DIR)
        self.client = OpenCodeClient(
            self.settings.opencode_url,
            username=self.deployment.opencode_username,
            password=self.deployment.opencode_password,
            timeouts=self.settings.timeouts,
        )
        # Children from before a restart: their ends must still be reported.
        chat = self.chat
        self.adopt_children(await chat.db(chat.store.live_children, agent_id=self.id))

    async def on_stop(self) -> None:
        tool_token.take_back_lent(self)
        client = getattr(self, "client", None)
        if client is not None:
            await client.aclose()

    async def run(self):
        while True:
            turn_id = await self._turns.get()
            await self.check_pause()  # paused: the person's next message waits for a resume
            task = asyncio.create_task(self._turn(turn_id), name=f"turn:{turn_id}")
            self._current = (turn_id, task)
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                me = asyncio.current_task()
                if me is not None and me.cancelling():  # the agent itself is stopping
                    task.cancel()  # the turn ends first, recording how far it got
                    await asyncio.wait([task])
                    raise
                # else only the turn was stopped: on to the next one
            except Exception:
                logger.exception("%s: turn %s failed", self.id, turn_id)
            finally:
                self._current = None
                self.chat.wake()  # a queued (synthetic) turn may go next

    async def _turn(self, turn_id: str) -> None:
        chat = self.chat
        begun = await chat.db(chat.store.begin_turn, turn_id=turn_id, agent_id=self.id)
        if begun is None:  # gone before it began
            return
        await chat.publish_all(begun.events)
        ctx = begun.context
        if ctx is None:  # stopped before it began
            return
        relay = TurnRelay(self._emitter(ctx.session_id), ctx.turn_id)
        outcome = TurnOutcome(status="done")
        answer, title, steps = "", "", []
        try:
            try:
                answer, title, steps = await self._ask(ctx, relay)
            except asyncio.CancelledError:
                stopped = self._stopping_turn == turn_id
                status = "stopped" if stopped else "interrupted"
                outcome = TurnOutcome(status=status, error="" if stopped else "runagentd stopped")
            except (OpenCodeError, SkillNotFound) as error:
                relay.send("error", {"message": str(error), "error_type": type(error).__name__})
                outcome = TurnOutcome(status="failed", error=str(error))
            if outcome.status == "done":
                await self.check_pause()  # paused mid-answer: its actions wait for a resume
                outcome = await self._act(ctx, relay, answer, title)
                # Its paid steps go to the ledger with the turn's close, in one transaction.
                outcome = dataclasses.replace(outcome, steps=steps)
            else:
                outcome = TurnOutcome(
                    status=outcome.status,
                    error=outcome.error,
                    text=relay.text(),
                    thinking=relay.thinking(),
                    parts=relay.saved_parts(),
                )
        finally:
            # Shielded: a stop must not cut the turn's own record short.
            await asyncio.shield(self._close(ctx, relay, outcome))

    async def _close(self, ctx: TurnContext, relay: TurnRelay, outcome: TurnOutcome) -> None:
        await relay.close()  # every event of the answer is out before the closing idle
        chat = self.chat
        await chat.publish_all(
            await chat.db(chat.store.finish_turn, turn_id=ctx.turn_id, outcome=outcome)
        )

    def _emitter(self, session_id: str):
        """How a turn's relay writes its events: on the reply stream's own thread (a token
        never queues behind heartbeats and claims), each published once stored."""
        chat = self.chat

        async def emit(events: list[tuple[str, dict]]) -> None:
            await chat.publish_all(
                await chat.db(
                    chat.store.emit, _streaming=True, session_id=session_id, events=events
                )
            )

        return emit

    async def _ask(self, ctx: TurnContext, relay: TurnRelay) -> tuple[str, str, list[dict]]:
        skill_id, prompt = build_prompt(
            self.skills, ctx.mode, ctx.variables, ctx.message, synthetic=ctx.synthetic
        )
        relay.send(
            "provenance",
            {
                "skill_id": skill_id,
                "mode": ctx.mode,
                "synthetic": ctx.synthetic,
                "variables": ctx.variables,
            },
        )
        chat = self.chat
        await chat.db(
            chat.store.save_prompt,
            turn_id=ctx.turn_id,
            prompt=prompt,
            skill_id=skill_id,
            variables=ctx.variables,
        )
        # Its MCP tools (wait_runs, get_run) act with its own token, for the chat's owner.
        if ctx.workdir:
            await tool_token.lend_to_chat(self, Path(ctx.workdir))
        opencode_session = ctx.opencode_session_id
        if not opencode_session:
            # Titled: OpenCode would title it itself by a model call it reports nowhere.
            title = provisional_title(ctx.message) or "Chat"
            opencode_session = await self.client.create_session(ctx.workdir, title=title)
            await chat.db(
                chat.store.set_opencode_session,
                session_id=ctx.session_id,
                opencode_session_id=opencode_session,
            )
            if not ctx.synthetic and ctx.title_unwritten:
                self._write_title(ctx, opencode_session)
        else:
            self._recover_titles(ctx, opencode_session)
        if ctx.opencode_session_id and ctx.after_interrupt:
            # The dead daemon's prompt may still run in OpenCode: end it, and let its
            # closing events pass before this prompt's stream opens.
            await self.client.abort(opencode_session, ctx.workdir)
            await asyncio.sleep(ABORT_SETTLE_S)
            await self._record_lost_steps(ctx, opencode_session)
        result = await self.client.prompt(
            opencode_session,
            prompt,
            provider=ctx.model_provider or self.settings.model_provider,
            model=ctx.model_id or self.settings.model_id,
            directory=ctx.workdir,
            on_part=relay.on_part,
        )
        return result.text, result.title or "", result.steps

    def _write_title(self, ctx: TurnContext, opencode_session: str) -> None:
        """The chat's title, beside its first reply (agentsys.chat.titles)."""
        self._titles_checked = True
        model = (
            ctx.model_provider or self.settings.model_provider,
            ctx.model_id or self.settings.model_id,
        )
        self._in_background(
            titles.title_chat(
                self.chat,
                self.client,
                session_id=ctx.session_id,
                message=ctx.message,
                directory=ctx.workdir,
                model=model,
                opencode_session=opencode_session,
            )
        )

    def _recover_titles(self, ctx: TurnContext, opencode_session: str) -> None:
        """Once an agent: a title an earlier runagentd asked for and never recorded."""
        if self._titles_checked or not ctx.title_unwritten:
            return
        self._titles_checked = True
        self._in_background(
            titles.recover_titles(
                self.chat,
                self.client,
                session_id=ctx.session_id,
                directory=ctx.workdir,
                opencode_session=opencode_session,
            )
        )

    async def _record_lost_steps(self, ctx: TurnContext, opencode_session: str) -> None:
        """The cut-off turn's paid steps went to the ledger with its close, which a killed
        daemon never wrote: read back from the OpenCode session, by the same keys (a step
        recorded already stays one entry). Best effort: the ledger must not cost a reply."""
        try:
            steps = await self.client.session_steps(opencode_session, ctx.workdir)
        except OpenCodeError as error:
            logger.warning(
                "%s: the steps of %s not read back: %s", self.id, opencode_session, error
            )
            return
        chat = self.chat
        await chat.db(chat.store.record_session_steps, session_id=ctx.session_id, steps=steps)

    # -- actions ----------------------------------------------------------------------------

    async def _act(self, ctx: TurnContext, relay: TurnRelay, answer: str, title: str):
        found = tags.parse_actions(answer)
        results = []
        for action in found:
            results.append(await self._carry_out(ctx, action))
        if ctx.mode == "wild" and not ctx.synthetic and tags.missing_required_spawn(found, "wild"):
            # The mode's promise holds even when the model forgets it (or writes it wrong).
            loop, note = tags.wild_fallback(found, answer, ctx.message)
            results.append(await self._carry_out(ctx, loop, note=note))
        for result in results:
            relay.send("l1_action", result)
        text = "\n\n".join([tags.strip_actions(answer), *tags.reply_notes(results)]).strip()
        return TurnOutcome(
            status="done",
            text=text,
            thinking=relay.thinking(),
            parts=relay.saved_parts(),
            actions=results,
            title=title,
        )

    async def _carry_out(self, ctx: TurnContext, action, note: str = "") -> dict:
        result = {
            "action": action.action,
            "goal": action.goal,
            "max_iterations": action.max_iterations,
            "agent_id": "",
            "command": action.command,
            "experiment_id": action.experiment_id,
            "context": action.context,
            "error": action.error,
            "note": note,
        }
        if not result["error"]:
            result["error"] = tags.check_mode(action, ctx.mode)
        if result["error"]:
            return result
        chat = self.chat
        try:
            if action.action == "spawn_research":
                child = await chat.db(
                    chat.store.start_research,
                    agent_id=self.id,
                    session_id=ctx.session_id,
                    goal=action.goal,
                    max_iterations=action.max_iterations,
                    workdir=action.workdir,
                )
                chat.wake()  # the daemon claims the new agent at once
                self.adopt_children([child])
                result["agent_id"] = child
            elif action.action == "spawn_command":
                config = {"command": action.command, "workdir": action.workdir or ctx.workdir}
                handle = await self.spawn_child(EXECUTOR_AGENT, action.goal, config)
                result["agent_id"] = handle.id
            else:
                kind = "steer" if action.action == "steer_child" else "stop"
                problem = await chat.db(
                    chat.store.command_child,
                    session_id=ctx.session_id,
                    target=action.experiment_id,
                    kind=kind,
                    context=action.context,
                )
                chat.wake()  # the command reaches its child's daemon at once
                result["error"] = problem
                result["agent_id"] = "" if problem else action.experiment_id
        except Exception as error:  # refused by the runtime: the person sees why
            result["error"] = f"{type(error).__name__}: {error}"
        return result

    # -- children ---------------------------------------------------------------------------

    def child_status(self, child_id, status, *, error="", replaced_by=""):
        super().child_status(child_id, status, error=error, replaced_by=replaced_by)
        if replaced_by or not AgentStatus(status).is_terminal or child_id in self._reported:
            return
        self._reported.add(child_id)
        self._in_background(self._report(child_id))

    async def _report(self, child_id: str) -> None:
        chat = self.chat
        try:
            report = await chat.db(chat.store.child_report, agent_id=child_id)
            if report:
                await chat.db(
                    chat.store.enqueue_synthetic,
                    session_id=self.session_id,
                    message=child_report_message(report),
                    child_id=child_id,
                )
                chat.wake()
        except Exception:
            logger.exception("%s: could not report the end of %s", self.id, child_id)
