"""An agent gets its memory and its run port from their own factories, each only when named:
a run's rows are not memory, so neither port stands in for the other."""

from types import SimpleNamespace

from agentsys.port_wiring import wire_ports


def memory_factory(agent_id, role, scope):
    return ("memory", agent_id, role, scope)


def run_port_factory(agent_id, role, scope):
    return ("runs", agent_id, role, scope)


def test_each_port_comes_from_its_own_factory():
    agent = SimpleNamespace(id="executor-1", memory=None, runs=None)
    wire_ports(
        agent,
        memory_factory=f"{__name__}:memory_factory",
        run_port_factory=f"{__name__}:run_port_factory",
        role="executor",
        scope={"run": "r1"},
    )
    assert agent.memory == ("memory", "executor-1", "executor", {"run": "r1"})
    assert agent.runs == ("runs", "executor-1", "executor", {"run": "r1"})


def test_a_port_not_named_stays_off():
    agent = SimpleNamespace(id="research-1", memory=None, runs=None)
    wire_ports(
        agent, memory_factory=f"{__name__}:memory_factory", run_port_factory="", role="", scope={}
    )
    assert agent.memory is not None
    assert agent.runs is None
