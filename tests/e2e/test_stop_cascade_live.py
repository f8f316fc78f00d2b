"""A stop cascade's `cancelled` events reach live clients when they happen (issue 18): runagentd
stored them without publishing, so a WebSocket or SSE client saw them only with the next event
or the 15 s keepalive. Real runagentd, daphne and both kinds of client."""

from __future__ import annotations

import time

import pytest
from django.db import transaction

from agents_app.models import Agent, AgentCommand, CommandStatus
from agents_app.services import request_agent_command, request_agent_start
from agentsys.types import CommandKind
from scheduler_app.models import ScheduleRequest
from tests.helpers import wait_until
from tests.live_clients import Follower, Web
from tests.runtime_harness import A, DaemonProcess, wait_status

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
LIVE_SECONDS = 2.0


@pytest.fixture
def system(agentsys_config):
    from tests.runtime_agents import ALL

    agentsys_config(extra_agent_classes=frozenset(ALL.split(",")))
    daemon = DaemonProcess("cascade-host")  # no GPUs: an executor asking for one waits
    web = Web()
    followers = [Follower("ws", web.port).start(), Follower("sse", web.port).start()]
    yield followers
    for follower in followers:
        follower.stop()
    web.stop()
    daemon.stop()


def _arrival(follower: Follower, agent_id: str, kind: str) -> float:
    return wait_until(
        lambda: next(
            (
                at
                for at, message in follower.received
                if message["agent_id"] == agent_id and message["kind"] == kind
            ),
            None,
        ),
        20,
        message=f"{follower.kind} to receive {kind} of {agent_id}",
    )


def test_a_child_queued_during_its_parents_stop_is_cancelled_live(system):
    followers = system
    # The parent takes its whole grace to stop (it ignores STOP until SIGTERM): the way a
    # research loop launching an experiment as Stop arrives leaves a child that the cascade,
    # having listed the subtree already, cancels only at its end, with its queued requests.
    parent = request_agent_start(
        cls_path=f"{A}.TestResearch",
        goal="launches an experiment as it is stopped",
        project="demo",
        config={"forever": True, "ignore_stop": True},
    )
    wait_status(parent.id, "running")
    command = request_agent_command(agent_id=parent.id, kind=CommandKind.STOP)
    wait_until(
        lambda: AgentCommand.objects.get(pk=command.pk).status == CommandStatus.DELIVERED,
        10,
        message="the stop to reach runagentd",
    )
    time.sleep(0.2)  # the cascade has listed the subtree; the parent is in its grace period
    with transaction.atomic():
        late = Agent.objects.create(
            id="executor-late",
            role="executor",
            cls_path=f"{A}.TestExecutor",
            goal="an experiment launched during the stop",
            parent_id=parent.id,
        )
        ScheduleRequest.objects.create(
            agent=late, agent_cls_path=late.cls_path, parent_id=parent.id, gpu_required=1
        )
    wait_status(late.id, "cancelled", timeout=15)
    for follower in followers:
        stopped = _arrival(follower, parent.id, "stopped")
        cancelled = _arrival(follower, late.id, "cancelled")
        # Stored right after the parent's end: it must not wait for a later event.
        assert cancelled - stopped < LIVE_SECONDS, (follower.kind, cancelled - stopped)
