"""bench/research.py's figures time what their names say (issue 40 §3), at a tiny size on the
real parts (git, and for the loop a real runagentd, the real OpenCode and the scripted model):

- loop_branch_worktree_ms runs around the one open_branch call, whose worktree it saw made;
  loop_branch_commit_* each around one commit of the loop's branch, with the snapshots and
  their diff outside;
- iteration_overhead_*: an iteration runs from its start, before its model was asked, to the
  loop's next step's start, after its memory was written; the model's time it takes off
  covers the model's answer and ends before the run was made; the run's own time lies
  inside, after the model's;
- research_loop_e2e_s: from runagentd up, before it started the loop, to the loop seen done,
  just after runagentd wrote it so."""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

import pytest

from agents_app.models import Agent
from agentsys.git_exclude import keep_out_of_git
from agentsys.research import branch as loop_branch
from agentsys.research.workspace import Workspace
from agentsys.scripted_llm import server as llm_server
from agentsys.scripted_llm.server import last_user_text
from bench import research
from hosts_app.models import Host
from memory_app.models import MemoryEntry
from research_app.models import ResearchLoop
from scheduler_app.models import Run
from tests.call_watch import Call, watch_awaited

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
FILES, COMMITS, ITERATIONS = 40, 3, 2
POLL_S = 0.5  # the most after the done was written that the loop may be seen done


def _diffs(monkeypatch) -> list[float]:
    """When each Workspace.changed (a static method: the diff of two snapshots) was called."""
    called, real = [], Workspace.changed

    def changed(before, after):
        called.append(time.time())
        return real(before, after)

    monkeypatch.setattr(Workspace, "changed", staticmethod(changed))
    return called


def _inside(span: research.Span, call: Call) -> bool:
    return span.began <= call.began and call.returned <= span.ended


def _overlaps(span: research.Span, calls: list[Call]) -> bool:
    return any(call.began <= span.ended and call.returned >= span.began for call in calls)


def test_branch_figures_time_the_worktree_made_and_each_commit_alone(tmp_path, monkeypatch):
    repo = research.big_repository(tmp_path, files=FILES)
    keep_out_of_git(repo, ".agents/")
    opens = watch_awaited(monkeypatch, loop_branch, "open_branch")
    commits = watch_awaited(monkeypatch, Workspace, "commit")
    looks = [
        *watch_awaited(monkeypatch, Workspace, "snapshot"),
        *watch_awaited(monkeypatch, Workspace, "git_ready"),
    ]
    diffs = _diffs(monkeypatch)
    times = asyncio.run(research.branch_times(repo, iterations=COMMITS))
    # The worktree: around open_branch, and git made the worktree in that span.
    [opened] = opens
    assert _inside(times.worktree, opened) and not _overlaps(times.worktree, looks)
    worktree = Path(opened.result[0].workdir)
    assert times.worktree.began <= (worktree / ".git").stat().st_mtime <= times.worktree.ended
    # Each commit: around one commit call, the snapshots and their diff before it.
    assert len(times.commits) == len(commits) == COMMITS
    for n, (span, commit) in enumerate(zip(times.commits, commits, strict=True)):
        assert _inside(span, commit) and not _overlaps(span, looks)
        assert not [at for at in diffs if span.began <= at <= span.ended]
        written = worktree / "runs" / f"events.out.tfevents.{n}"  # its iteration's last file
        assert written.stat().st_mtime < span.began
    made = [commit.result.hash for commit in commits]
    logged = subprocess.run(
        ["git", "log", f"-{COMMITS}", "--format=%H"], cwd=worktree, capture_output=True, text=True
    )
    # Each span's call made the branch's next commit (a commit's hash comes short).
    assert len(logged.stdout.split()) == COMMITS
    assert all(map(str.startswith, logged.stdout.split(), made[::-1]))
    assert research.span_ms(times.commits[0]) == pytest.approx(
        (times.commits[0].ended - times.commits[0].began) * 1000
    )


class _Arrivals(list):
    """The scripted model's requests, each with when it arrived (the model appends each)."""

    def __init__(self):
        super().__init__()
        self.at: list[float] = []

    def append(self, body):
        self.at.append(time.time())
        super().append(body)


def _answered(monkeypatch) -> dict[int, float]:
    """id(request body) → when the model made its last chunk of the answer to it."""
    last, real = {}, llm_server._chunk

    def chunk(body, *args, **kwargs):
        last[id(body)] = time.time()
        return real(body, *args, **kwargs)

    monkeypatch.setattr(llm_server, "_chunk", chunk)
    return last


def _asked(arrivals: _Arrivals, answered: dict, text: str) -> tuple[float, float]:
    """(arrived, answered) of the one request whose last user text holds `text`."""
    [(at, body)] = [
        (at, b) for at, b in zip(arrivals.at, arrivals, strict=True) if text in last_user_text(b)
    ]
    return at, answered[id(body)]


def test_iteration_overhead_and_loop_e2e_read_the_loops_own_instants(
    make_daemon, scripted_llm, workdir, monkeypatch
):
    scripted_llm.load(research.overhead_script(ITERATIONS))
    arrivals = _Arrivals()
    monkeypatch.setattr(scripted_llm, "requests", arrivals)
    answered = _answered(monkeypatch)
    loop_id, span = research.timed_loop(make_daemon, 90, **research.noop_loop(workdir, ITERATIONS))
    points = research.iteration_points(loop_id)
    assert [p.iteration for p in points] == list(range(1, ITERATIONS + 1))
    for p in points:
        asked, answer = _asked(arrivals, answered, f"Iteration {p.iteration} of")
        run = Run.objects.get(agent_id=_run_of(loop_id, p.iteration))
        # Start: the iteration began before its model was asked.
        assert p.started <= asked
        # The model's time covers its answer, and ends before the iteration's run was made.
        assert p.model_s >= answer - asked
        assert p.started + p.model_s <= run.created_at.timestamp()
        # The run's own time: its claim to its end, inside the iteration, after the model.
        assert (p.run.began, p.run.ended) == (
            run.started_at.timestamp(),
            run.finished_at.timestamp(),
        )
        assert run.created_at.timestamp() <= p.run.began <= p.run.ended <= p.ended
        # End: the loop's next step began, after this iteration's memory was written.
        memory = MemoryEntry.objects.get(agent_id=loop_id, data__iteration=p.iteration)
        assert memory.created_at.timestamp() <= p.ended
        assert p.ended <= next(at for at in arrivals.at if at > asked)
        assert research.iteration_overhead_ms(p) == pytest.approx(
            (p.ended - p.started - p.model_s - (p.run.ended - p.run.began)) * 1000
        )
    _e2e_from_runagentd_up_to_done(loop_id, span)


def _run_of(loop_id: str, iteration: int) -> str:
    """The agent id of the run the loop's iteration ran."""
    history = ResearchLoop.objects.get(pk=loop_id).state["history"]
    [step] = [s for s in history if s["phase"] == "iteration" and s["iteration"] == iteration]
    return step["runs"][0]


def _e2e_from_runagentd_up_to_done(loop_id: str, span: research.Span) -> None:
    agent = Agent.objects.get(pk=loop_id)
    assert agent.status == "done"
    # Start: runagentd up (its own start-up is not the loop's), before it started the loop.
    up = Host.objects.get(name="research-host").daemon_started_at
    assert up.timestamp() <= span.began <= agent.started_at.timestamp()
    assert agent.finished_at.timestamp() <= span.ended < agent.finished_at.timestamp() + POLL_S
