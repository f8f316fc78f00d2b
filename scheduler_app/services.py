"""Writes for hosts, GPUs, the queue, runs and alerts. Keyword-only, each one atomic."""

from __future__ import annotations

import contextlib
import os
import platform
import socket
import sys

from django.db import transaction
from django.utils import timezone

from agents_app.models import Agent
from agents_app.services import AgentCommandRefused, request_agent_command
from agentsys.scheduling import gpu_labels
from agentsys.types import CommandKind
from events_app.events import AGENTS_STREAM, record_event
from hosts_app.models import Host, HostStatus
from scheduler_app import oplog
from scheduler_app.models import GPU, Alert, AlertStatus, Run, ScheduleRequest
from scheduler_app.queue.claims import notify_queue
from scheduler_app.queue.lifecycle import cancel_requests
from scheduler_app.run_news import runs_changed
from scheduler_app.runs import launch as runs


class ServiceError(Exception):
    """A request that cannot be carried out as asked; the message says why."""


@transaction.atomic
def register_host(
    *,
    name: str,
    pid: int,
    gpus: list[dict] | None = None,
    slurm: str | None = None,
    labels: dict | None = None,
) -> Host:
    """Mark `name` online for the daemon `pid` and record the GPUs it found (or declared).
    `slurm`: None when it does not submit to SLURM, else what it found (partitions, nodes).
    Its labels: those it declares over what its GPUs say (agentsys.scheduling.gpu_labels)."""
    now = timezone.now()
    host, _ = Host.objects.select_for_update().get_or_create(name=name)
    host.hostname = socket.gethostname()
    host.status = HostStatus.ONLINE
    host.daemon_pid = pid
    host.daemon_started_at = now
    host.last_heartbeat = now
    host.version = "0.1.0"
    host.info = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "slurm": slurm is not None,
        "slurm_detail": slurm or "",
    }
    host.labels = {**gpu_labels(gpus or []), **(labels or {})}
    host.save()
    if gpus is not None:
        sync_gpus(host=host, gpus=gpus)
    return host


def sync_gpus(*, host: Host, gpus: list[dict]) -> None:
    """Make the host's GPU rows match what it has now. A GPU in use is kept (and disabled if
    it disappeared) so its booking is never lost."""
    existing = {gpu.index: gpu for gpu in host.gpus.select_for_update()}
    seen = set()
    for found in gpus:
        index = int(found["index"])
        seen.add(index)
        gpu = existing.get(index) or GPU(host=host, index=index)
        gpu.uuid, gpu.name = found.get("uuid", ""), found.get("name", "")
        gpu.memory_total_mb, gpu.source = found.get("memory_total_mb"), found["source"]
        gpu.enabled = True
        gpu.save()
    for index, gpu in existing.items():
        if index in seen:
            continue
        if gpu.allocated_to_id:
            gpu.enabled = False
            gpu.save(update_fields=["enabled"])
        else:
            gpu.delete()


def record_heartbeat(*, host_id: int) -> bool:
    """Returns True when the host had been declared dead (its runagentd was cut off from the
    database for longer than the others waited)."""
    now = timezone.now()
    alive = Host.objects.filter(pk=host_id).exclude(status=HostStatus.DEAD)
    if alive.update(last_heartbeat=now, status=HostStatus.ONLINE):
        return False
    return bool(
        Host.objects.filter(pk=host_id).update(last_heartbeat=now, status=HostStatus.ONLINE)
    )


def mark_host_offline(*, host_id: int) -> None:
    Host.objects.filter(pk=host_id).update(status=HostStatus.OFFLINE, daemon_pid=None)


@transaction.atomic
def cancel_request(*, request_id: str) -> ScheduleRequest:
    """Withdraw a queued request; its agent and its run are cancelled with it. Anything past
    the queue is refused with the reason."""
    request = ScheduleRequest.objects.get(pk=request_id)
    if not cancel_requests(ScheduleRequest.objects.filter(pk=request_id)):
        request.refresh_from_db()
        raise ServiceError(
            f"{request_id} is {request.status}; only queued requests can be cancelled"
        )
    request.refresh_from_db()
    return request


ALERT_CHOICES = ["acknowledge", "stop"]


@transaction.atomic
def raise_alert(
    *,
    agent_id: str,
    severity: str,
    message: str,
    signature: str = "",
    memory_key: str = "",
    run_dir: str = "",
) -> Alert:
    """An Alert a person sees, and its `alert_raised` event in the agents stream (the one
    `/api/agents/events` and the WebSocket serve), committed together."""
    alert = Alert.objects.create(
        run=Run.objects.filter(agent_id=agent_id).first(),
        agent_id=agent_id,
        severity=severity,
        message=message,
        signature=signature,
        choices=ALERT_CHOICES,
        memory_key=memory_key,
    )
    _alert_event(alert, "alert_raised", run_dir=run_dir)
    if alert.run_id:
        runs_changed([alert.run_id])  # its waiters (wait_runs) hear of it at commit
    oplog.alert_raised(alert)
    return alert


@transaction.atomic
def respond_to_alert(*, alert_id: str, response: str, user=None) -> Alert:
    """Answer an alert (acknowledge it, or stop what raised it: the caller does the stop);
    its `alert_resolved` event, naming the response, commits with it."""
    alert = Alert.objects.select_for_update().get(pk=alert_id)
    if alert.status == AlertStatus.RESOLVED:
        raise ServiceError(f"{alert_id} was already resolved ({alert.response or 'no response'})")
    if alert.choices and response not in alert.choices:
        raise ServiceError(f"response must be one of {', '.join(alert.choices)}")
    alert.status = AlertStatus.RESOLVED
    alert.response = response
    alert.responded_at = timezone.now()
    alert.responded_by = user
    alert.save()
    _alert_event(
        alert, "alert_resolved", response=response, responded_by=user.get_username() if user else ""
    )
    return alert


def answer_alert(*, alert_id: str, response: str, user=None) -> Alert:
    """Respond to an alert and act on the answer: `stop` stops the run that raised it (or the
    agent, when it has no run). The response is recorded even if that already ended."""
    with transaction.atomic():
        alert = respond_to_alert(alert_id=alert_id, response=response, user=user)
    if response == "stop":
        stop_what_raised(alert=alert, user=user)
    return alert


def stop_what_raised(*, alert: Alert, user=None) -> None:
    """Stop the run that raised `alert`, or its agent when it has no run; one that already
    ended is left as it is."""
    if alert.run_id:
        with contextlib.suppress(runs.RunRefused):
            runs.stop_run(run_id=alert.run_id)
        return
    with contextlib.suppress(AgentCommandRefused, Agent.DoesNotExist), transaction.atomic():
        request_agent_command(agent_id=alert.agent_id, kind=CommandKind.STOP, user=user)


def _alert_event(alert: Alert, kind: str, **extra) -> None:
    record_event(
        stream=AGENTS_STREAM,
        kind=kind,
        agent_id=alert.agent_id,
        payload={
            "alert_id": alert.id,
            "status": str(alert.status),
            "severity": alert.severity,
            "message": alert.message,
            "run_id": alert.run_id,
            "choices": alert.choices,
            **extra,
        },
    )


@transaction.atomic
def record_foreign_gpu_use(*, host_id: int, processes: list[dict]) -> list[int]:
    """Mark the host's free GPUs that processes this system did not start hold memory on;
    returns the indices whose state changed. `processes` ({pid, name, gpu_uuid, used_mb}) must
    be read before this runs: a GPU allocated by then is a run of ours, whatever is on it."""
    by_uuid: dict[str, list[dict]] = {}
    for process in processes:
        by_uuid.setdefault(process["gpu_uuid"], []).append(
            {k: process[k] for k in ("pid", "name", "used_mb")}
        )
    changed = []
    for gpu in GPU.objects.select_for_update().filter(host_id=host_id):
        held = [] if gpu.allocated_to_id else sorted(by_uuid.get(gpu.uuid, []), key=_by_pid)
        if held != gpu.held_by_others:
            gpu.held_by_others = held
            gpu.save(update_fields=["held_by_others"])
            changed.append(gpu.index)
    if changed:
        notify_queue()  # a GPU let go of: claim it now, not at the next poll
    return changed


def _by_pid(process: dict) -> int:
    return process["pid"]
