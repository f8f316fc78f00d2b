"""ResearchAgent (L2): plan → iterate → reflect, with its model behind OpenCode
and its experiments run as executors through the GPU queue.

Each step ends by saving the loop's state (agentsys.research.state) to its workdir and, as a
`research_state` event, to the database. The agent is resumable: a new runagentd restarts it
with the same id, and it picks up at its last unfinished step (agentsys.research.starting),
re-adopting the experiments that step had launched instead of launching them again.

A model call that fails (down, timed out, a provider error) uses up no iteration: the failure
goes into the history as a `model_error` step saying what to check (agentsys.research.
model_trouble), the same step is asked again, and the loop fails only after
`max_model_failures` in a row, saying why. A reply cut off at the model's output limit is
read as far as it goes, and the next prompt tells the model so.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import asdict
from pathlib import Path

from agentsys.agent import Agent
from agentsys.research import (
    asking,
    attention,
    batch_approval,
    budget,
    experiments,
    run_wakes,
    starting,
    tool_token,
)
from agentsys.research.experiments import new_launch_id
from agentsys.research.llm import ModelReply
from agentsys.research.logbook import (
    control_section,
    iteration_section,
    reflection_section,
)
from agentsys.research.model_trouble import read_reply
from agentsys.research.prompt_variables import prompt_variables
from agentsys.research.reply import ParsedReply
from agentsys.research.results import ExperimentResult
from agentsys.research.state import (
    ENDED,
    ITERATING,
    PLANNING,
    REFLECTING,
    IterationRecord,
)
from agentsys.research.workspace import MAX_SNAPSHOT_FILES
from agentsys.types import AgentRole, EntryType

logger = logging.getLogger("agentsys.research")


class ResearchAgent(Agent):
    role = AgentRole.RESEARCH
    allowed_children = frozenset({AgentRole.EXECUTOR})
    resumable = True

    async def on_start(self) -> None:
        await starting.start(self)  # settings, state (resumed or new), branch, worktree, token

    @property
    def work_root(self) -> Path:
        """Where it, its model and its runs work: its worktree's copy of the workdir."""
        return starting.work_root(self)

    async def _commit(self, message: str, changed: list[str] | None = None) -> str:
        made = await self.workspace.commit(message, self.settings.commit_allow, changed)
        self.state.keep_left_out(made.left_out)
        return made.hash

    async def run(self):
        if self.branch_note:
            self.workspace.append_log(f"_{self.branch_note}._")
        if self.config.get("resume"):
            await asking.steps_read_back(self)
        self._save()  # its branch shows (page, API) from the start, not after its plan
        steps = {PLANNING: self._plan, ITERATING: self._iterate, REFLECTING: self._reflect}
        while self.state.phase != ENDED:
            await self.check_pause()
            await steps[self.state.phase]()
        self.state.status, self.state.finished_at = "done", time.time()
        self._save()
        return {"iterations": self.state.iteration, "reflection": self.state.reflection}

    async def on_stop(self) -> None:
        try:
            if not self.detached and self.state.status == "running":
                self.state.status = "stopped" if self._stop_requested else "failed"
                self.state.finished_at = time.time()
                self._save()
                await self.gateway.abort(self.state.opencode_session_id)
        finally:
            if not self.detached:  # detached, it is not over: the next runagentd resumes it
                tool_token.take_back(self, self.work_root)
                if self.branch is not None:  # its own worktree: no one else's model works there
                    await self.gateway.release_workdir()
            await self.gateway.aclose()

    # -- the three steps ---------------------------------------------------------------------

    async def _plan(self) -> None:
        started = time.time()
        reply = await self._ask("wild_v2_planning", await self._variables())
        if reply is None:
            return  # recorded; tried again
        await self.check_pause()  # the plan's memory and commit wait for a resume
        parsed = read_reply(reply.text, reply.finish)
        plan = parsed.plan or parsed.summary
        problems = list(parsed.problems)
        if not parsed.plan:
            problems.append("the plan reply had no <plan> block; its text was used as the plan")
        self.state.plan = plan
        self.workspace.write_tasks(plan)
        await self.remember(EntryType.PLAN, {"goal": self.state.goal, "plan": plan}, tags=["plan"])
        record = IterationRecord(
            iteration=0,
            phase="plan",
            summary=parsed.summary,
            errors=problems,
            started_at=started,
            finished_at=time.time(),
            duration_s=time.time() - started,
            model_s=reply.model_s,
            tool_calls=reply.tool_calls,
        )
        record.commit = await self._commit(f"AgentSys {self.id}: research plan")
        self.workspace.append_log(f"## Plan\n\n{plan}")
        self.state.parse_problems = problems
        self.state.record(record)
        self.state.phase = ITERATING
        self._save()

    async def _iterate(self) -> None:
        progress = self.state.in_progress
        if progress.get("children") is not None:  # resumed after its experiments started
            n, parsed = progress["iteration"], read_reply(progress.get("reply", ""), progress)
            parsed.cap_experiments(self.settings.max_experiments_per_iteration)  # its note
            launched, model_s = progress["children"], progress.get("model_s", 0.0)
            before = self.workspace.load_snapshot() or {}
        elif progress.get("reply") is not None:  # resumed while it launched them
            n, parsed = progress["iteration"], read_reply(progress["reply"], progress)
            model_s = progress.get("model_s", 0.0)
            before = self.workspace.load_snapshot() or {}
            launched = await self._launch(n, parsed, progress)
        else:
            await attention.wait_for_answer(self)  # an open question: no prompt until answered
            n = self.state.iteration + 1
            self.state.in_progress = progress = {"iteration": n, "started_at": time.time()}
            messages = await self._inbox()
            for message in messages:
                self._log_control("Message from the researcher (read now)", message)
            steer = "\n".join(filter(None, [self.consume_steer(), *messages]))
            if steer:
                self.state.steer_context = steer
            before = await self.workspace.snapshot()
            self.workspace.save_snapshot(before)
            self._save()
            reply = await self._ask("wild_v2_iteration", await self._variables(iteration=n))
            if reply is None:  # recorded; this iteration is asked again
                self.state.in_progress = {}
                self._save()
                return
            parsed, model_s = read_reply(reply.text, reply.finish), reply.model_s
            if parsed.plan:
                self.state.plan = parsed.plan
                self.workspace.write_tasks(parsed.plan)
            # Kept before any experiment is spawned: a restart from here on launches these
            # (finding those already spawned), never asks the model again.
            progress.update(
                reply=reply.text,
                finish=reply.finish,
                model_s=model_s,
                tools=reply.tool_calls,
                launch=new_launch_id(),
            )
            self._save()
            launched = await self._launch(n, parsed, progress)
        waited = time.monotonic()
        waiting_on = [*self.state.running, *launched]  # earlier iterations' still running
        news = await self._wait_for_news(waiting_on)
        experiments_s = time.monotonic() - waited if waiting_on else 0.0
        await self.check_pause()  # results that came in with a pause are read on resume
        found = attention.review(self.state, parsed, progress.get("reply", ""), n)
        self.state.running, self.state.woke = news.running, news.woke
        await self._finish_iteration(n, parsed, news.results, before, model_s, experiments_s)
        await attention.follow_up(self, found)  # a question, or prose twice: tell the person
        await self._pause_after(parsed.promise, ran_experiments=bool(waiting_on))

    async def _wait_for_news(self, waiting_on: list[dict]) -> experiments.News:
        """Until the first of them ends (`wake_on` "each", the default), or all of them
        ("all"), watching the budget's caps meanwhile."""
        if not waiting_on:
            return experiments.News([], [], "")
        children = [r["child_id"] for r in waiting_on if r.get("child_id")]
        watch = asyncio.create_task(budget.stop_runs_at_cap(self, children))
        timeout = self.settings.experiment_timeout_s
        try:
            if self.settings.wake_on == "all":
                results = await experiments.wait_for(self, waiting_on, timeout=timeout)
                return experiments.News(results, [], "")
            news = await experiments.wait_for_news(
                self, waiting_on, timeout=timeout, watch=await self._runs_watch(children)
            )
        finally:
            watch.cancel()
        self.state.wake_since = time.time()
        if news.held is not None and news.held.condition.kind == "metric":
            self.state.woken_by.append([news.held.run_id, news.held.condition.words()])
        return news

    async def _runs_watch(self, children: list[str]):
        """What the loop's `wake_when` watches its runs for meanwhile (None: nothing)."""
        if not self.settings.wake_when or not children:
            return None
        run_ids = await run_wakes.run_ids_of(self, children)
        since = self.state.wake_since or self.state.started_at
        return run_wakes.woken_by_runs(
            self, run_ids, self.settings.wake_when, since=since, woken=self.state.woken_by
        )

    async def _launch(self, n: int, parsed: ParsedReply, progress: dict) -> list[dict]:
        parsed.cap_experiments(self.settings.max_experiments_per_iteration)
        if parsed.experiments:
            await budget.hold_at_cap(self, "its next experiments")
            await batch_approval.hold_for_approval(self, parsed.experiments)
        launched = await experiments.launch(
            self,
            parsed.experiments,
            root=self.work_root,
            iteration=n,
            run_options=self.settings.run_options(),
            launch=progress.get("launch", ""),
        )
        progress["children"] = launched
        self._save()  # from here on, a restart waits for these instead of launching them
        return launched

    async def _finish_iteration(
        self,
        n: int,
        parsed: ParsedReply,
        results: list[ExperimentResult],
        before: dict,
        model_s: float,
        experiments_s: float,
    ) -> None:
        started = self.state.in_progress.get("started_at", time.time())
        after = await self.workspace.snapshot()
        files = self.workspace.changed(before, after)
        errors = list(parsed.problems) + [
            f"experiment {r.goal!r}: {r.status}" + (f" ({r.error})" if r.error else "")
            for r in results
            if r.status != "done"
        ]
        record = IterationRecord(
            iteration=n,
            phase="iteration",
            promise=parsed.promise,
            summary=parsed.summary,
            files_changed=files,
            runs=[r.run_id for r in results if r.run_id],
            errors=errors,
            started_at=started,
            model_s=model_s,
            experiments_s=experiments_s,
            tool_calls=self.state.in_progress.get("tools") or [],
        )
        # The snapshots' list when both are whole: git then looks at those files only.
        whole = before and len(after) < MAX_SNAPSHOT_FILES
        record.commit = await self._commit(
            f"AgentSys {self.id}: iteration {n}: {parsed.summary[:60]}", files if whole else None
        )
        record.finished_at = time.time()
        record.duration_s = record.finished_at - started
        self.workspace.append_log(iteration_section(record))
        await self.remember(
            EntryType.CONTEXT,
            {"iteration": n, "promise": parsed.promise, "summary": parsed.summary},
            tags=["iteration"],
        )
        self._end_iteration(record, results, parsed.problems)
        if parsed.promise == "DONE" or n >= self.state.max_iterations:
            self.state.phase = REFLECTING
        self._save()

    def _end_iteration(self, record: IterationRecord, results, problems: list[str]) -> None:
        state = self.state
        state.record(record)
        state.iteration = self.iteration = record.iteration
        state.last_results = [asdict(r) for r in results] or state.last_results
        state.parse_problems = list(problems)
        state.in_progress, state.steer_context = {}, ""
        self.emit_event(
            "iteration",
            {
                "iteration": record.iteration,
                "promise": record.promise,
                "summary": record.summary,
                "files_changed": record.files_changed,
                "runs": record.runs,
                "errors": record.errors,
            },
        )

    async def _pause_after(self, promise: str | None, *, ran_experiments: bool) -> None:
        if self.state.phase != ITERATING:
            return
        if promise == "WAITING" and not ran_experiments:
            await asyncio.sleep(self.settings.wait_seconds)
        else:
            await asyncio.sleep(self.settings.pause_seconds)

    async def _reflect(self) -> None:
        if self.state.running:  # the reflection reads every result: the last ones first
            results = await experiments.wait_for(
                self, self.state.running, timeout=self.settings.experiment_timeout_s
            )
            self.state.last_results = [asdict(r) for r in results] or self.state.last_results
            self.state.running, self.state.woke = [], ""
            self._save()
        started = time.time()
        reply = await self._ask("wild_v2_reflection", await self._variables())
        if reply is None:
            return
        parsed = read_reply(reply.text, reply.finish)
        self.state.reflection = parsed.reflection or parsed.summary
        await self.check_pause()  # a pause as the reply came in holds its memories too
        await self._store_memories(parsed)
        go_on = parsed.continue_loop is True and self.state.iteration < self.state.max_iterations
        record = IterationRecord(
            iteration=self.state.iteration,
            phase="reflection",
            promise="REFLECT_CONTINUE" if go_on else "REFLECT_STOP",
            summary=self.state.reflection[:300],
            errors=list(parsed.problems),
            started_at=started,
            finished_at=time.time(),
            duration_s=time.time() - started,
            model_s=reply.model_s,
            tool_calls=reply.tool_calls,
        )
        self.workspace.append_log(reflection_section(record, self.state.reflection, parsed))
        self.state.record(record)
        self.state.parse_problems = list(parsed.problems)
        self.state.phase = ITERATING if go_on else ENDED
        self._save()

    async def _store_memories(self, parsed: ParsedReply) -> None:
        memories = parsed.memories or (
            [("general", parsed.reflection)] if parsed.reflection else []
        )
        by_tag: dict[str, list[dict]] = {}
        for tag, text in memories:
            by_tag.setdefault(tag, []).append(
                {"text": text, "tag": tag, "goal": self.state.goal, "iteration": self.iteration}
            )
        for tag, rows in by_tag.items():
            await self.remember_many(EntryType.REFLECTION, rows, tags=[tag])

    # -- a person's commands, in the iteration log --------------------------------------------

    async def on_pause(self) -> None:
        self._log_control("Paused by the researcher")

    async def on_resume(self) -> None:
        self._log_control("Resumed")

    def inject_steer(self, context: str) -> None:
        super().inject_steer(context)
        self._log_control("Steer from the researcher (priority: acted on next iteration)", context)

    def _log_control(self, title: str, text: str = "") -> None:
        workspace = getattr(self, "workspace", None)  # None: a command before on_start
        if workspace is None:
            return
        try:
            workspace.append_log(
                control_section(title, at=time.time(), iteration=self.state.iteration, text=text)
            )
        except OSError:  # the log is for reading later; the command itself still applies
            logger.exception("%s: could not write to the iteration log", self.id)

    # -- the model ---------------------------------------------------------------------------

    async def _ask(self, skill: str, variables: dict) -> ModelReply | None:
        return await asking.ask(self, skill, variables)

    async def _variables(self, **extra) -> dict:
        return prompt_variables(
            self.state,
            self.settings,
            self.workspace,
            agent_id=self.id,
            memories_text=await self._memories_text(),
            budget_left=await self._budget_left(),
            running_experiments=await experiments.still_running(
                self, self.state.running, self.state.woke
            ),
            **extra,
        )

    async def _budget_left(self) -> str:
        if not self.state.budget:
            return ""
        return budget.left_words(self.state.budget, await budget.spent_now(self))

    async def _inbox(self) -> list[str]:
        """MESSAGE-tier steers waiting in the inbox, read (acknowledged) once. An approval is
        no steer: it is left for the budget's wait to take (agentsys.research.budget). One can
        be there before that wait polls: given while runagentd was down, the resumed loop reads
        its inbox before it reaches its cap again, and taken here the wait would never see it."""
        try:
            entries = [
                e for e in await self.in_memory("read_inbox") or [] if not budget.is_approval(e)
            ]
            for entry in entries:
                await self.in_memory("ack", key=entry.key)
        except Exception:  # a message read late beats a loop that stops
            logger.exception("%s: could not read its inbox", self.id)
            return []
        return [str((e.data or {}).get("context") or e.data) for e in entries]

    async def _memories_text(self) -> str:
        try:
            return await self.in_memory("memory_bank") or ""
        except Exception:  # the loop goes on without its memories
            logger.exception("%s: could not read the memory bank", self.id)
            return ""

    def _save(self) -> None:
        self.state.save(self.workspace.state_path)
        self.emit_event("research_state", self.state.as_dict())
