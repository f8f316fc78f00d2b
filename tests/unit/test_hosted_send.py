"""A command sent to an agent whose worker is still being taken (a parent resuming after a
runagentd restart while its child's end arrives) waits for the worker, never crashes the
supervisor's inbox nor is dropped (CI: AttributeError on `None.send`, the child's end lost)."""

from multiprocessing import Pipe

from agentsys.agent import Agent, Scope
from agentsys.hosted import Hosted
from agentsys.ipc import PipeChannel
from agentsys.store import AgentRecord
from agentsys.types import AgentStatus


def _hosted() -> Hosted:
    record = AgentRecord(
        id="research-1",
        role="research",
        cls_path="agentsys.agents.research.ResearchAgent",
        parent_id=None,
        goal="",
        config={},
        scope=Scope(project="demo"),
        status=AgentStatus.RUNNING,
    )
    return Hosted(record=record, cls=Agent)


def test_a_command_sent_before_the_worker_is_attached_follows_its_spec():
    hosted = _hosted()
    child_end = {"t": "child_status", "child_id": "executor-1", "status": "done"}
    assert hosted.send(child_end) is True
    worker_end, parent_end = Pipe()
    channel = PipeChannel(parent_end)
    channel.send({"spec": True})  # the supervisor sends the spec first
    hosted.attach(object(), channel)
    hosted.send({"t": "stop"})
    received = [worker_end.recv() for _ in range(3)]
    assert received == [{"spec": True}, child_end, {"t": "stop"}]
    assert not worker_end.poll()  # each sent once
