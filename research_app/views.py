"""Research loop pages: the list, and one loop — goal, status, the plan (tasks.md with its
checkboxes), each iteration's summary, promise, files changed with a link to its commit's
diff, its experiments (runs with their final loss), the reflection and the memories it wrote.
The page follows the agents feed and re-renders its body (htmx) when the loop moves."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from agents_app.views import TIERS
from agentsys.research.branch import LoopBranch
from agentsys.run_dir import TASKS_FILE, loop_dir_of
from agentsys.types import TERMINAL_AGENT_STATUSES
from events_app.events import AGENTS_STREAM
from events_app.selectors import last_seq
from memory_app.models import MemoryEntry
from memory_app.rendering import plan_items
from research_app import branch_review, loop_controls, progress, questions, selectors
from research_app.models import ResearchLoop
from scheduler_app.models import MetricSeries
from scheduler_app.selectors import LOSS_KEYS

COMMIT = re.compile(r"[0-9a-f]{7,40}")
DIFF_TIMEOUT_SECONDS = 10
DIFF_LIMIT = 400_000
TEXT_LIMIT = 200_000


def loop_list(request: HttpRequest) -> HttpResponse:
    loops = [selectors.summary(loop) for loop in selectors.loops(limit=100, offset=0)]
    return render(request, "research_app/loops.html", {"nav": "research", "loops": loops})


def _loop_or_404(agent_id: str) -> ResearchLoop:
    loop = selectors.loop(agent_id)
    if loop is None:
        raise Http404("No such research loop")
    return loop


def _read(path: Path | None) -> str:
    if path is None or not path.is_file():
        return ""
    with path.open(errors="replace") as handle:
        return handle.read(TEXT_LIMIT)


def _final_losses(history: list[dict]) -> None:
    run_ids = [run["id"] for step in history for run in step["runs"] if run["id"]]
    found = MetricSeries.objects.filter(run_id__in=run_ids, key__in=LOSS_KEYS)
    last = {run_id: value for run_id, value in found.values_list("run_id", "last_value")}
    for step in history:
        for run in step["runs"]:
            run["final_loss"] = last.get(run["id"])


def loop_detail(request: HttpRequest, agent_id: str) -> HttpResponse:
    feed_after = last_seq(stream=AGENTS_STREAM)  # before the rows: see agents_app.views
    loop = _loop_or_404(agent_id)
    detail = selectors.detail(loop)
    if selectors.stop_pending(loop):
        detail["state"] = selectors.state_words(
            loop.agent.status, detail["phase"], loop.iteration, stopping=True
        )
    _final_losses(detail["history"])
    detail["answer_sent"] = bool(detail["question"]) and questions.answer_sent(loop)
    workdir = selectors.work_dir(loop)
    tasks = _read(loop_dir_of(workdir, loop.agent_id) / TASKS_FILE if workdir else None)
    tasks = tasks or loop.plan
    live = loop.agent.status not in TERMINAL_AGENT_STATUSES
    context = {
        "nav": "research",
        "loop": detail,
        "live": live,
        **_branch_context(loop),
        "timeline": selectors.timeline(loop),
        "tiers": TIERS,
        "plan": plan_items(tasks),
        "iteration_log": _read(selectors.iteration_log_path(loop)),
        "memories": MemoryEntry.objects.filter(agent_id=loop.agent_id)
        .exclude(type="metrics")
        .order_by("-created_at")[:50],
    }
    loop_controls.attach(detail["history"], loop, context["timeline"])
    if request.headers.get("HX-Request"):
        return render(request, "research_app/_loop_body.html", context)
    context["feed_after"] = feed_after
    return render(request, "research_app/loop.html", context)


def _branch_context(loop: ResearchLoop) -> dict:
    """Its branch as a change to review, with the best run's figure beside it, of the runs
    in its comparison (read again as the body re-renders: a running loop's commits show as
    they come)."""
    found = LoopBranch.from_dict(loop.state.get("branch"))
    if found is None:
        return {}
    best = progress.best_loss(loop.sweep_id, compared_only=True) if loop.sweep_id else None
    # Losses logged, but only by runs out of its comparison: the card says none is compared.
    none_compared = best is None and loop.sweep_id and progress.best_loss(loop.sweep_id)
    return {
        "branch_review": branch_review.review(found),
        "best": best,
        "none_compared": bool(none_compared),
    }


def loop_progress(request: HttpRequest, agent_id: str) -> HttpResponse:
    """The line a chat's card shows of the loop it started, asked again while the loop runs."""
    found = progress.loop_progress(agent_id)
    if found is None:
        raise Http404("No such research loop")
    return render(request, "research_app/_progress.html", {"p": found})


def commit_diff(request: HttpRequest, agent_id: str, commit: str) -> HttpResponse:
    """One commit of the loop's, as `git show` prints it: one it recorded, or one on its
    branch since it started; read with a timeout and a size cap."""
    loop = _loop_or_404(agent_id)
    recorded = {
        str(h.get("commit") or "") for h in loop.state.get("history") or [] if isinstance(h, dict)
    }
    found = LoopBranch.from_dict(loop.state.get("branch"))
    if COMMIT.fullmatch(commit) and commit not in recorded and found is not None:
        recorded |= {c.hash for c in branch_review.review(found).commits}
    if not COMMIT.fullmatch(commit) or commit not in recorded:
        raise Http404("No such commit in this loop")
    workdir = str(loop.settings.get("workdir") or "")
    try:
        shown = subprocess.run(
            ["git", "show", "--stat", "--patch", "--no-color", commit],
            cwd=workdir or None,
            capture_output=True,
            timeout=DIFF_TIMEOUT_SECONDS,
            check=False,
        )
        text = shown.stdout[:DIFF_LIMIT].decode("utf-8", "replace") or shown.stderr.decode(
            "utf-8", "replace"
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        text = f"git could not show {commit}: {error}"
    context = {"nav": "research", "loop": selectors.summary(loop), "commit": commit, "diff": text}
    return render(request, "research_app/diff.html", context)
