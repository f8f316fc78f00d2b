"""What a research loop hands each experiment it launches: the command, its params, and the
loop's run options (its sweep's): the metrics_pattern for reading what the experiment prints,
the backend and its SLURM options."""

import asyncio
from types import SimpleNamespace

from agentsys.research.experiments import launch
from agentsys.research.reply import ExperimentSpec


class Spawner:
    id = "research-1"

    def __init__(self) -> None:
        self.configs: list[dict] = []

    async def check_pause(self) -> None:  # never paused here
        pass

    async def spawn_child(self, cls_path, goal, config):
        self.configs.append(config)
        return SimpleNamespace(id=f"exec-{len(self.configs)}")


def test_each_experiment_gets_the_loops_run_options(tmp_path):
    agent = Spawner()
    specs = [ExperimentSpec(goal="a", command="python t.py", parameters={"lr": 0.1})]
    pattern = r"it (?P<step>\d+) cost (?P<cost>\S+)"
    options = {"metrics_pattern": pattern, "backend": "slurm", "slurm": {"partition": "gpu"}}
    launched = asyncio.run(launch(agent, specs, root=tmp_path, iteration=1, run_options=options))
    assert launched[0]["child_id"] == "exec-1"
    assert agent.configs[0]["metrics_pattern"] == pattern
    assert agent.configs[0]["backend"] == "slurm"
    assert agent.configs[0]["slurm"] == {"partition": "gpu"}
    assert agent.configs[0]["params"] == {"lr": 0.1}

    asyncio.run(launch(agent, specs, root=tmp_path, iteration=2, run_options={}))
    assert "metrics_pattern" not in agent.configs[1]  # none: the common line shapes
    assert "backend" not in agent.configs[1]  # the deployment's default, chosen at submit
