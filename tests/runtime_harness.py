"""Starting real runagentd processes against the test database, and reading what they did."""

from __future__ import annotations

import signal
import subprocess
import time

from agents_app.models import Agent
from events_app.models import Event
from hosts_app.models import Host, HostStatus
from tests import runtime_agents
from tests.helpers import child_env, database_url_of_current_connection, manage, wait_until

A = runtime_agents.MODULE  # "tests.runtime_agents"


class DaemonProcess:
    def __init__(self, name: str, *args: str, **env_overrides: str):
        self.name = name
        env = child_env(
            DATABASE_URL=database_url_of_current_connection(),
            AGENTSYS_AGENT_CLASSES=runtime_agents.ALL,
            AGENTSYS_HOST_NAME=name,
            LOG_LEVEL="WARNING",
            # SLURM only where a test asks for it (AGENTSYS_SLURM="on").
            **{"AGENTSYS_SLURM": "off", **env_overrides},
        )
        self.process = manage(
            "runagentd", "--heartbeat", "0.5", "--stop-grace", "1", *args, env=env
        )
        try:
            wait_until(
                lambda: Host.objects.filter(
                    name=name, status=HostStatus.ONLINE, daemon_pid=self.process.pid
                ).exists(),
                30,
                message=f"runagentd {name} to register",
            )
        except BaseException:  # the test fails here: no runagentd left behind without a parent
            self.process.kill()
            self.process.wait()
            raise

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self, sig=signal.SIGTERM, timeout: float = 10) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                return self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                # Where it hangs, in the test's output: runagentd dumps every thread's stack
                # on SIGUSR1 (faulthandler).
                self.process.send_signal(signal.SIGUSR1)
                time.sleep(1)
                self.process.kill()
                self.process.wait()
                raise
        return self.process.returncode


def status_of(agent_id: str) -> str:
    return Agent.objects.values_list("status", flat=True).get(pk=agent_id)


def wait_status(agent_id: str, *statuses: str, timeout: float = 20) -> Agent:
    return wait_until(
        lambda: Agent.objects.filter(pk=agent_id, status__in=statuses).first(),
        timeout,
        message=f"{agent_id} to be {'/'.join(statuses)} (is {status_of(agent_id)})",
    )


def children_of(agent_id: str) -> list[Agent]:
    return list(Agent.objects.filter(parent_id=agent_id).order_by("created_at"))


def wait_child(parent_id: str, timeout: float = 20) -> Agent:
    return wait_until(
        lambda: Agent.objects.filter(parent_id=parent_id).first(),
        timeout,
        message=f"a child of {parent_id}",
    )


def events(agent_id: str, kind: str | None = None) -> list[Event]:
    found = Event.objects.filter(agent_id=agent_id).order_by("seq")
    return list(found.filter(kind=kind) if kind else found)


def wait_event(agent_id: str, kind: str, timeout: float = 20) -> Event:
    return wait_until(
        lambda: Event.objects.filter(agent_id=agent_id, kind=kind).first(),
        timeout,
        message=f"event {kind} of {agent_id}",
    )
