"""Research loop figures, with a real runagentd, the real OpenCode server and the project's
scripted model:

- iteration_overhead_p50_ms / _p99_ms: what one iteration costs beyond its model and its
  experiment (prompt rendering, parsing, spawning the executor through the queue, waiting on
  its end event, reading its results, snapshot and diff, git, the log, saving the state), over
  ITERATIONS iterations with an instant model and a no-op experiment (`true`): the iteration's
  duration (from its start to the loop's next step's start: its log, memory and state saved
  before that) minus the model's time and minus the run's own time (started → finished).
- research_loop_e2e_s: the demo loop (the demo model on the demo workspace), start to done.
- loop_branch_commit_p50_ms / _p99_ms: what a loop's own branch adds to an iteration on a
  repository of BRANCH_FILES files: its commit in its worktree (status, sorting code from
  outputs, add, commit) with a few files changed and a TensorBoard file left out, over
  BRANCH_ITERATIONS iterations; loop_branch_worktree_ms: making the worktree, once a loop.

Each figure is read between instants named here (IterationPoints, Span: wall-clock time, so
that they compare with the rows and calls a test watches:
tests/integration/test_bench_research_points.py).
"""

import itertools
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._report import percentile, report
from bench.harness import REPO
from bench.spans import Span, span_ms

ITERATIONS = 30
BRANCH_FILES = 10_000
BRANCH_ITERATIONS = 30
NOOP = "<experiments>\n- goal: no-op\n  command: true\n  gpu_required: 0\n</experiments>\n"


@dataclass(frozen=True)
class IterationPoints:
    """One iteration's instants and parts, as the loop and its run wrote them."""

    iteration: int
    started: float  # its history step's started_at: the loop began it
    # The loop's next step's started_at: this one's commit, log, memory and state are done by
    # then. Not its own finished_at, which the loop takes before those.
    ended: float
    model_s: float  # its model's time (the loop's own span of the call to OpenCode)
    run: Span  # its one run's started_at (the claim) → finished_at


def iteration_overhead_ms(points: IterationPoints) -> float:
    own = points.run.ended - points.run.began
    return (points.ended - points.started - points.model_s - own) * 1000


def overhead_script(iterations: int = ITERATIONS) -> dict:
    turns = [{"match": "agentsys-prompt: planning", "steps": [{"text": "<plan>1. go</plan>"}]}]
    for n in range(1, iterations + 1):
        promise = "DONE" if n == iterations else "CONTINUE"
        text = f"{NOOP}<summary>step {n}</summary><promise>{promise}</promise>"
        turns.append({"match": f"Iteration {n} of", "steps": [{"text": text}]})
    turns.append(
        {"match": "agentsys-prompt: reflection", "steps": [{"text": "<continue>no</continue>"}]}
    )
    return {"turns": turns}


def noop_loop(workdir: Path, iterations: int = ITERATIONS) -> dict:
    """The loop of overhead_script: no wait, no pause between its iterations."""
    return {
        "goal": "bench: no-op iterations",
        "max_iterations": iterations,
        "wait_seconds": 0,
        "workdir": str(workdir),
        "extra_config": {"pause_seconds": 0},
    }


def workspace(root: Path) -> Path:
    work = root / "work"
    shutil.copytree(REPO / "researchagent" / "demo_workspace", work)
    ident = ["-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "start"]):
        subprocess.run(["git", *ident, *args], cwd=work, check=True)
    return work


def wait_done(loop_id: str, timeout: float, began: float) -> Span:
    """From `began` to the loop seen `done`."""
    from agents_app.models import Agent

    while time.time() - began < timeout:
        agent = Agent.objects.get(pk=loop_id)
        if agent.status in ("done", "failed", "stopped"):
            if agent.status != "done":
                raise RuntimeError(f"{loop_id} ended {agent.status}: {agent.error}")
            return Span(began, time.time())
        time.sleep(0.05)
    raise RuntimeError(f"{loop_id} did not finish in {timeout} s")


def timed_loop(start_daemon, timeout: float, **loop) -> tuple[str, Span]:
    """A research loop made with `loop`, then a runagentd (`start_daemon()`, returning once it
    is up) to run it: the loop's id and the span from that runagentd up to the loop done."""
    from research_app import services

    made = services.start_research(**loop)
    start_daemon()
    return made.agent_id, wait_done(made.agent_id, timeout, time.time())


def iteration_points(loop_id: str) -> list[IterationPoints]:
    """Each iteration of the loop that ran one run, read once the loop is done."""
    from research_app.models import ResearchLoop
    from scheduler_app.models import Run

    history = ResearchLoop.objects.get(pk=loop_id).state["history"]
    runs = {r.agent_id: r for r in Run.objects.filter(sweep__research_loops__agent_id=loop_id)}
    found = []
    for step, after in itertools.pairwise(history):
        if step["phase"] != "iteration" or len(step["runs"]) != 1:
            continue
        run = runs[step["runs"][0]]
        ran = Span(run.started_at.timestamp(), run.finished_at.timestamp())
        found.append(
            IterationPoints(
                step["iteration"], step["started_at"], after["started_at"], step["model_s"], ran
            )
        )
    return found


def big_repository(root: Path, files: int = BRANCH_FILES) -> Path:
    repo = root / "big"
    for n in range(files):
        folder = repo / f"pkg{n // 500}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"mod{n}.py").write_text(f"VALUE = {n}\n")
    ident = ["-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "start"]):
        subprocess.run(["git", *ident, *args], cwd=repo, check=True)
    return repo


@dataclass(frozen=True)
class BranchTimes:
    worktree: Span  # open_branch: the loop's branch and its worktree made
    commits: list[Span]  # each iteration's commit in it, its snapshots outside


async def branch_times(repo: Path, iterations: int = BRANCH_ITERATIONS) -> BranchTimes:
    """A loop's branch on `repo` (a worktree of it), then `iterations` iterations, each
    changing three files and leaving a TensorBoard file for the commit to leave out."""
    from agentsys.research.branch import open_branch
    from agentsys.research.workspace import Workspace

    began = time.time()
    branch, why = await open_branch(repo, "research-bench")
    worktree = Span(began, time.time())
    if branch is None:
        raise RuntimeError(why)
    work = Workspace(Path(branch.workdir), "research-bench")
    await work.git_ready()
    commits = []
    before = await work.snapshot()
    for n in range(iterations):
        for k in range(3):  # (a small repository, a test's, may not have these folders)
            (work.workdir / f"pkg{k}").mkdir(exist_ok=True)
            (work.workdir / f"pkg{k}" / f"mod{k}.py").write_text(f"VALUE = {n}\n")
        (work.workdir / "runs").mkdir(exist_ok=True)
        (work.workdir / "runs" / f"events.out.tfevents.{n}").write_bytes(b"\0" * 4096)
        after = await work.snapshot()  # the loop takes both snapshots anyway
        changed = work.changed(before, after)
        began = time.time()
        made = await work.commit(f"iteration {n}", changed=changed)
        commits.append(Span(began, time.time()))
        before = after
        if not made.hash or f"runs/events.out.tfevents.{n}" not in made.left_out:
            raise RuntimeError(f"iteration {n}: {made}")
    return BranchTimes(worktree, commits)


def branch_figures(root: Path) -> None:
    import asyncio

    from agentsys.git_exclude import keep_out_of_git

    repo = big_repository(root)
    keep_out_of_git(repo, ".agents/")
    times = asyncio.run(branch_times(repo))
    samples = [span_ms(span) for span in times.commits]
    report("loop_branch_worktree_ms", span_ms(times.worktree), "ms")
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
        loop_id, _ = timed_loop(system.start_daemon, 300, **noop_loop(work))
        samples = [iteration_overhead_ms(points) for points in iteration_points(loop_id)]
        report("iteration_overhead_p50_ms", percentile(samples, 50), "ms")
        report("iteration_overhead_p99_ms", percentile(samples, 99), "ms")

        # The demo loop, against the OpenCode of the demo model (a second runagentd env).
        system.close()
        system.env.update(OPENCODE_URL=servers[1].url, OPENCODE_SERVER_PASSWORD=servers[1].password)
        system.processes = []
        _, span = timed_loop(
            system.start_daemon,
            300,
            goal="Find the learning rate that gives train.py the lowest final loss",
            max_iterations=5,
            wait_seconds=5,
            workdir=str(work),
        )
        report("research_loop_e2e_s", span_ms(span) / 1000, "s")
    finally:
        system.close()
        for server in servers:
            server.stop()
        llm.stop()
        demo.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
