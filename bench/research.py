"""Research loop figures, with a real runagentd, the real OpenCode server and the project's
scripted model:

- iteration_overhead_p50_ms / _p99_ms: what one iteration costs beyond its model and its
  experiment (prompt rendering, parsing, spawning the executor through the queue, waiting on
  its end event, reading its results, snapshot and diff, git, the log, saving the state), over
  ITERATIONS iterations with an instant model and a no-op experiment (`true`): the iteration's
  duration minus the model's time and minus the run's own time (started → finished).
- research_loop_e2e_s: the demo loop (the demo model on the demo workspace), start to done.
"""

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._report import percentile, report
from bench.harness import REPO

ITERATIONS = 30
NOOP = "<experiments>\n- goal: no-op\n  command: true\n  gpu_required: 0\n</experiments>\n"


def overhead_script() -> dict:
    turns = [{"match": "agentsys-prompt: planning", "steps": [{"text": "<plan>1. go</plan>"}]}]
    for n in range(1, ITERATIONS + 1):
        promise = "DONE" if n == ITERATIONS else "CONTINUE"
        text = f"{NOOP}<summary>step {n}</summary><promise>{promise}</promise>"
        turns.append({"match": f"Iteration {n} of", "steps": [{"text": text}]})
    turns.append(
        {"match": "agentsys-prompt: reflection", "steps": [{"text": "<continue>no</continue>"}]}
    )
    return {"turns": turns}


def workspace(root: Path) -> Path:
    work = root / "work"
    shutil.copytree(REPO / "researchagent" / "demo_workspace", work)
    ident = ["-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "start"]):
        subprocess.run(["git", *ident, *args], cwd=work, check=True)
    return work


def wait_done(loop_id: str, timeout: float) -> float:
    from agents_app.models import Agent

    started = time.monotonic()
    while time.monotonic() - started < timeout:
        agent = Agent.objects.get(pk=loop_id)
        if agent.status in ("done", "failed", "stopped"):
            if agent.status != "done":
                raise RuntimeError(f"{loop_id} ended {agent.status}: {agent.error}")
            return time.monotonic() - started
        time.sleep(0.05)
    raise RuntimeError(f"{loop_id} did not finish in {timeout} s")


def overheads(loop_id: str) -> list[float]:
    from research_app.models import ResearchLoop
    from scheduler_app.models import Run

    history = ResearchLoop.objects.get(pk=loop_id).state["history"]
    runs = {r.agent_id: r for r in Run.objects.filter(sweep__research_loops__agent_id=loop_id)}
    found = []
    for step in history:
        if step["phase"] != "iteration" or len(step["runs"]) != 1:
            continue
        run = runs[step["runs"][0]]
        own = (run.finished_at - run.started_at).total_seconds()
        found.append((step["duration_s"] - step["model_s"] - own) * 1000)
    return found


def main() -> None:
    from agentsys.opencode.server import LocalOpenCode, provider_config
    from agentsys.scripted_llm import ScriptedLLM

    root = Path(tempfile.mkdtemp(prefix="agentsys-bench-research-"))
    work = workspace(root)
    llm = ScriptedLLM(overhead_script())
    llm.serve_in_thread()
    demo = ScriptedLLM(demo=True)
    demo.serve_in_thread()
    servers = []
    for name, model in (("scripted", llm), ("demo", demo)):
        server = LocalOpenCode(
            state_dir=root / f"opencode-{name}",
            workdir=work,
            config=provider_config(
                provider="demo", model="demo-research", demo_base_url=model.base_url + "/v1"
            ),
        )
        server.start()
        servers.append(server)
    import os

    os.environ.update(
        OPENCODE_URL=servers[0].url,
        OPENCODE_SERVER_PASSWORD=servers[0].password,
        MODEL_PROVIDER="demo",
        MODEL_ID="demo-research",
        AGENTSYS_WORKDIR=str(work),
    )
    from bench.harness import BenchSystem

    system = BenchSystem()
    try:
        from research_app import services

        loop = services.start_research(
            goal="bench: no-op iterations",
            max_iterations=ITERATIONS,
            wait_seconds=0,
            workdir=str(work),
            extra_config={"pause_seconds": 0},
        )
        system.start_daemon()
        wait_done(loop.agent_id, 300)
        samples = overheads(loop.agent_id)
        report("iteration_overhead_p50_ms", percentile(samples, 50), "ms")
        report("iteration_overhead_p99_ms", percentile(samples, 99), "ms")

        # The demo loop, against the OpenCode of the demo model (a second runagentd env).
        system.close()
        system.env.update(OPENCODE_URL=servers[1].url, OPENCODE_SERVER_PASSWORD=servers[1].password)
        system.processes = []
        demo_loop = services.start_research(
            goal="Find the learning rate that gives train.py the lowest final loss",
            max_iterations=5,
            wait_seconds=5,
            workdir=str(work),
        )
        system.start_daemon()
        report("research_loop_e2e_s", wait_done(demo_loop.agent_id, 300), "s")
    finally:
        system.close()
        for server in servers:
            server.stop()
        llm.stop()
        demo.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
