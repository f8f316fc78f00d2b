"""A pause must hold an agent wherever it waits (issue 34): a step waiting on its model is
cancelled by a pause (the prompt aborted) and run again on resume; a result that arrives
together with the pause is not acted on; a stop ends the step; and a research loop launching
its experiments spawns none after the pause. No runtime, no database: the agent's own code."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from agentsys.agent import START_PAUSED, Agent
from agentsys.research.experiments import launch
from agentsys.research.reply import ExperimentSpec
from agentsys.types import AgentStatus


class Link:
    def __init__(self) -> None:
        self.statuses: list[AgentStatus] = []

    def status_changed(self, agent, status) -> None:
        self.statuses.append(status)

    def emit(self, agent, kind, payload) -> None:
        pass


def wired_agent(config: dict | None = None) -> Agent:
    agent = Agent()
    agent.wire(agent_id="a-1", goal="g", config=config or {}, scope=None, link=Link())
    agent.status = AgentStatus.RUNNING
    return agent


class Model:
    """A model call that waits until told to answer; counts starts and cancellations."""

    def __init__(self) -> None:
        self.started = 0
        self.cancelled = 0
        self.answer = asyncio.Event()

    async def ask(self) -> str:
        self.started += 1
        try:
            await self.answer.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return f"reply {self.started}"


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_pause_cancels_the_step_and_resume_runs_it_again():
    agent, model = wired_agent(), Model()
    task = asyncio.create_task(agent.interruptible(model.ask))
    await settle()
    assert model.started == 1
    await agent.pause()
    await settle()
    assert model.cancelled == 1  # the prompt was aborted at once, not waited out
    assert agent.status == AgentStatus.PAUSED
    await asyncio.sleep(0.05)
    assert model.started == 1 and not task.done()  # nothing asked while paused
    await agent.resume()
    await settle()
    assert model.started == 2  # asked again
    model.answer.set()
    assert await asyncio.wait_for(task, 1) == "reply 2"


async def test_a_reply_that_comes_with_the_pause_is_dropped_and_asked_again():
    agent, model = wired_agent(), Model()
    task = asyncio.create_task(agent.interruptible(model.ask))
    await settle()
    model.answer.set()  # the reply and the pause in the same turn of the loop
    await agent.pause()
    await settle()
    assert not task.done()
    await agent.resume()
    assert await asyncio.wait_for(task, 1) == "reply 2"


async def test_a_stop_while_waiting_cancels_the_step():
    agent, model = wired_agent(), Model()
    task = asyncio.create_task(agent.interruptible(model.ask))
    await settle()
    task.cancel()  # what Agent.stop does to the agent's task
    with pytest.raises(asyncio.CancelledError):
        await task
    await settle()
    assert model.cancelled == 1


async def test_an_agent_restarted_while_paused_starts_paused():
    class Quick(Agent):
        ran = False

        async def run(self):
            await self.check_pause()  # as every agent does before a step of work
            Quick.ran = True

    agent = Quick()
    agent.wire(agent_id="a-2", goal="g", config={START_PAUSED: True}, scope=None, link=Link())
    await agent.start()
    await asyncio.sleep(0.05)
    assert agent.status == AgentStatus.PAUSED and not Quick.ran
    await agent.resume()
    assert await asyncio.wait_for(agent.wait(), 1) == AgentStatus.DONE
    assert Quick.ran


class Spawner(Agent):
    """A research loop's side of launch: spawns are recorded, never run."""

    def __init__(self) -> None:
        super().__init__()
        self.spawned: list[str] = []

    async def spawn_child(self, cls, goal, config=None, **scope):
        self.spawned.append(goal)
        await asyncio.sleep(0)  # a spawn waits on the supervisor's reply
        return SimpleNamespace(id=f"exec-{len(self.spawned)}")


async def test_no_experiment_is_spawned_after_the_pause(tmp_path):
    agent = Spawner()
    agent.wire(agent_id="r-1", goal="g", config={}, scope=None, link=Link())
    agent.status = AgentStatus.RUNNING
    specs = [ExperimentSpec(goal=f"e{i}", command="true") for i in range(3)]
    launching = asyncio.create_task(
        launch(agent, specs, root=tmp_path, iteration=1, run_options={})
    )
    while not agent.spawned:  # the first spawn on its way (however many steps launch takes)
        await asyncio.sleep(0)
    await agent.pause()
    await asyncio.sleep(0.05)
    assert agent.spawned == ["e0"]  # sent before the pause was recorded; nothing after
    await agent.resume()
    launched = await asyncio.wait_for(launching, 1)
    assert [r["child_id"] for r in launched] == ["exec-1", "exec-2", "exec-3"]


class Child:
    """A child handle that ends when told; records whether it was stopped."""

    def __init__(self, agent) -> None:
        self.id, self.status, self.error = "exec-1", AgentStatus.RUNNING, ""
        self.stopped = False
        self._done = asyncio.Event()
        self._expired = asyncio.Event()
        agent.children[self.id] = self

    def end(self) -> None:
        self.status = AgentStatus.DONE
        self._done.set()

    def time_runs_out(self) -> None:
        """The wait in progress ends as when its `timeout` passes."""
        self._expired.set()

    async def wait(self, timeout=None):
        self._expired.clear()
        waits = [asyncio.ensure_future(event.wait()) for event in (self._done, self._expired)]
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        for waiting in waits:
            waiting.cancel()
        if not self._done.is_set():
            raise TimeoutError
        return self.status

    async def cancel(self) -> None:
        self.stopped = True
        self.status = AgentStatus.STOPPED
        self._done.set()


def launched_record(child, workdir) -> dict:
    """What launch records of one experiment it spawned."""
    return {
        "goal": "g",
        "command": "true",
        "parameters": {},
        "gpu_required": 0,
        "workdir": str(workdir),
        "child_id": child.id,
    }


class Clock:
    """The agent's clock (agentsys.agent's time.monotonic), moved only by the test: a busy
    machine's pauses between two steps of the test cannot count as the experiment's time."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


async def test_time_spent_paused_does_not_count_against_an_experiments_time_limit(
    tmp_path, monkeypatch
):
    import agentsys.agent
    from agentsys.research.experiments import wait_for

    clock = Clock()
    monkeypatch.setattr(agentsys.agent, "time", clock)
    agent = wired_agent()
    child = Child(agent)
    launched = [launched_record(child, tmp_path)]
    waiting = asyncio.create_task(wait_for(agent, launched, timeout=0.4))
    await settle()
    clock.now += 0.1
    await agent.pause()
    clock.now += 60  # a person's break, far longer than the whole time limit
    child.time_runs_out()  # the loop looks at its time while paused
    await settle()
    await agent.resume()
    await settle()
    clock.now += 0.1
    child.end()  # 0.2 s of the 0.4 s limit ran
    results = await asyncio.wait_for(waiting, 2)
    assert not child.stopped and results[0].status == "done"


async def test_an_experiment_past_its_time_limit_is_still_stopped(tmp_path):
    from agentsys.research.experiments import wait_for

    agent = wired_agent()
    child = Child(agent)
    launched = [launched_record(child, tmp_path)]
    results = await asyncio.wait_for(wait_for(agent, launched, timeout=0.2), 2)
    assert child.stopped and results[0].status == "timed out"


async def test_a_pause_that_reaches_an_agent_before_it_started_holds_its_start():
    class Quick(Agent):
        ran = False

        async def run(self):
            await self.check_pause()
            Quick.ran = True

    link = Link()
    agent = Quick()
    agent.wire(agent_id="a-3", goal="g", config={}, scope=None, link=link)
    await agent.pause()  # the command came with its worker, before start()
    await agent.start()
    await asyncio.sleep(0.05)
    assert agent.status == AgentStatus.PAUSED and not Quick.ran
    assert link.statuses == [AgentStatus.PAUSED]
    await agent.resume()
    assert await asyncio.wait_for(agent.wait(), 1) == AgentStatus.DONE
