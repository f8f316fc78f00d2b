"""Research loop figures, with a real runagentd, the real OpenCode server and the project's
scripted model:

- iteration_overhead_p50_ms / _p99_ms: what one iteration costs beyond its model and its
  experiment (prompt rendering, parsing, spawning the executor through the queue, waiting on
  its end event, reading its results, snapshot and diff, git, the log, saving the state), over
  ITERATIONS iterations with an instant model and a no-op experiment (`true`): the iteration's
  duration minus the model's time and minus the run's own time (started → finished).
- research_loop_e2e_s: the demo loop (the demo model on the demo workspace), start to done.
- loop_branch_commit_p50_ms / _p99_ms: what a loop's own branch adds to an iteration on a
  repository of BRANCH_FILES files: its commit in its worktree (status, sorting code from
  outputs, add, commit) with a few files changed and a TensorBoard file left out, over
  BRANCH_ITERATIONS iterations; loop_branch_worktree_ms: making the worktree, once a loop.
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
BRANCH_FILES = 10_000
BRANCH_ITERATIONS = 30
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


def big_repository(root: Path) -> Path:
    repo = root / "big"
    for n in range(BRANCH_FILES):
        folder = repo / f"pkg{n // 500}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"mod{n}.py").write_text(f"VALUE = {n}\n")
    ident = ["-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "start"]):
        subprocess.run(["git", *ident, *args], cwd=repo, check=True)
    return repo


def branch_figures(root: Path) -> None:
    import asyncio

    from agentsys.git_exclude import keep_out_of_git
    from agentsys.research.branch import open_branch
    from agentsys.research.workspace import Workspace

    repo = big_repository(root)
    keep_out_of_git(repo, ".agents/")

    async def measure() -> tuple[float, list[float]]:
        started = time.perf_counter()
        branch, why = await open_branch(repo, "research-bench")
        made_ms = (time.perf_counter() - started) * 1000
        if branch is None:
            raise RuntimeError(why)
        work = Workspace(Path(branch.workdir), "research-bench")
        await work.git_ready()
        samples = []
        before = await work.snapshot()
        for n in range(BRANCH_ITERATIONS):
            for k in range(3):
                (work.workdir / f"pkg{k}" / f"mod{k}.py").write_text(f"VALUE = {n}\n")
            (work.workdir / "runs").mkdir(exist_ok=True)
            (work.workdir / "runs" / f"events.out.tfevents.{n}").write_bytes(b"\0" * 4096)
            after = await work.snapshot()  # the loop takes both snapshots anyway
            started = time.perf_counter()
            made = await work.commit(f"iteration {n}", changed=work.changed(before, after))
            samples.append((time.perf_counter() - started) * 1000)
            before = after
            if not made.hash or f"runs/events.out.tfevents.{n}" not in made.left_out:
                raise RuntimeError(f"iteration {n}: {made}")
        return made_ms, samples

    made_ms, samples = asyncio.run(measure())
    report("loop_branch_worktree_ms", made_ms, "ms")
    report("loop_branch_commit_p50_ms", percentile(samples, 50), "ms")
    report("loop_branch_commit_p99_ms", percentile(samples, 99), "ms")


def main() -> None:
    from agentsys.opencode.server import LocalOpenCode, provider_config
    from agentsys.scripted_llm import ScriptedLLM

    root = Path(tempfile.mkdtemp(prefix="agentsys-bench-research-"))
    branch_figures(root)
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
