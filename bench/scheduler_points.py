"""The two instants each of bench/scheduler.py's figures is read between, named, and the
figure made from them: what a figure times is said here once, and
tests/integration/test_bench_scheduler_points.py checks that each instant is the one its name
says.

Every instant is wall-clock time (time.time(), or a row's timestamp, which Django writes from
the same clock), so the ones the bench takes and the ones the product wrote compare."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

# What an executor emits first from its own process (runagentd: it runs there, issue 25), in
# ExecutorAgent._start_process: on_start has placed it, its run directory is made and its
# command's process exists. Not the "started" event: since issue 25 the claim's transaction
# writes that one, with the request's started_at, before the executor has done anything.
EXECUTOR_FIRST_EVENT = "run_started"


@dataclass(frozen=True)
class RunPoints:
    """One run's instants, each as the process that made it wrote it."""

    agent_id: str
    submitted: datetime  # its request's created_at: the submit's transaction
    placed: datetime  # its request's started_at: the claim's transaction
    executor_up: datetime  # its executor's first event's created_at, written by runagentd


def submit_to_running_ms(run: RunPoints) -> float:
    """The scheduler's part: submit → the claim that placed it on GPUs."""
    return (run.placed - run.submitted).total_seconds() * 1000


def submit_to_executor_started_ms(run: RunPoints) -> float:
    """Submit → its executor up in runagentd and its command started."""
    return (run.executor_up - run.submitted).total_seconds() * 1000


def run_points(agent_id: str) -> RunPoints:
    """The instants of the run executor `agent_id` runs, read once it has ended."""
    from events_app.models import Event
    from scheduler_app.models import ScheduleRequest

    request = ScheduleRequest.objects.get(agent_id=agent_id)
    first = Event.objects.filter(agent_id=agent_id, kind=EXECUTOR_FIRST_EVENT).order_by("id")
    up = first.values_list("created_at", flat=True).first()
    if up is None:
        raise RuntimeError(f"{agent_id} ended ({request.status}) without a {EXECUTOR_FIRST_EVENT}")
    return RunPoints(agent_id, request.created_at, request.started_at, up)


@dataclass
class TimedClaims:
    """In-process claims: each claim call's (began, ended); the releases between two calls
    are outside every window, untimed."""

    claimed: int = 0
    windows: list[tuple[float, float]] = field(default_factory=list)


def claims_per_s(timed: TimedClaims) -> float:
    return timed.claimed / sum(ended - began for began, ended in timed.windows)


@dataclass(frozen=True)
class ClaimRound:
    """One round of claimer processes on one queue: `go` is when they were let go (each
    connected and waiting, every GPU free), `filled` when each had its host full (or saw the
    queue empty), `ends_go` when they were let end their runs, `ended` when each had."""

    go: float
    filled: list[float]
    ends_go: float
    ended: list[float]


@dataclass(frozen=True)
class HostsClaims:
    claimed: int
    rounds: list[ClaimRound]


def hosts_claims_per_s(claims: HostsClaims) -> float:
    """Claims over the rounds' claiming time: each round from its go to the last host full.
    The runs' ends between rounds are timed apart (hosts_run_ends_per_s), as the in-process
    figure leaves out the releases between its claims."""
    return claims.claimed / sum(max(r.filled) - r.go for r in claims.rounds)


def hosts_run_ends_per_s(claims: HostsClaims) -> float:
    """The same runs' ends (lifecycle.follow_agent: each request, GPU, agent and run row
    ended) over the rounds' ending time, every host ending its own at once."""
    return claims.claimed / sum(max(r.ended) - r.ends_go for r in claims.rounds)


@dataclass(frozen=True)
class Drain:
    submitted: float  # the batch submit called
    last_ended: datetime  # the finished_at of the run that ended last


def drain_s(drain: Drain) -> float:
    return drain.last_ended.timestamp() - drain.submitted


@dataclass(frozen=True)
class Posts:
    """HTTP posts timed at the client: the first sent, the last one's answer received."""

    count: int
    sent: float
    answered: float


def post_ms(posts: Posts) -> float:
    return (posts.answered - posts.sent) * 1000


def posts_per_s(posts: Posts) -> float:
    return posts.count / (posts.answered - posts.sent)


def line_to_web_ms(printed: float, served: float) -> float:
    """A log line: from the time.time() the run printed in it to the GET that returned it
    answered at the client."""
    return (served - printed) * 1000
