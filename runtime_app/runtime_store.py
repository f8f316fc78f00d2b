"""The Django side of agentsys.store.RuntimeStore. Each method is one unit of work on the
daemon's database thread; state changes and their events commit together. A database
outage surfaces as StoreUnavailable, with the broken connection dropped so that the call can
simply be repeated."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from django.conf import settings
from django.db import connection, connections, transaction
from django.db.models import Q
from django.utils import timezone

from accounts_app.services import revoke_agent_tokens
from agents_app.models import Agent, AgentCommand, CommandStatus
from agents_app.services import create_agent
from agentsys.policies import policy_named
from agentsys.run_dir import run_dir_of
from agentsys.slurm.job import job_state_of_event
from agentsys.store import AgentRecord, CommandRecord
from agentsys.types import (
    LIVE_AGENT_STATUSES,
    TERMINAL_AGENT_STATUSES,
    AgentRole,
    AgentStatus,
    EntryType,
    RequestStatus,
)
from common.json_safe import json_safe
from events_app.events import AGENTS_STREAM, record_event, record_events
from hosts_app.models import Host, HostStatus
from ledger_app.services import record_llm_steps
from memory_app.services import write_entry
from runtime_app.agent_records import agent_record
from runtime_app.store_outage import raising_store_unavailable
from scheduler_app import oplog
from scheduler_app import services as host_services
from scheduler_app.hosts.down import readopt_runs_of_returned_host, settle_runs_of_dead_host
from scheduler_app.metrics.compaction import DEFAULT_STRETCHES, compact_old_points
from scheduler_app.models import ScheduleRequest
from scheduler_app.queue import claims as queue
from scheduler_app.queue import lifecycle
from scheduler_app.runs import code as run_code
from scheduler_app.runs.launch import record_slurm_state


def _experiment_code(record: AgentRecord) -> run_code.RecordedCode:
    """The code of an experiment's workdir, which this runagentd (its loop's host) sees."""
    host = Agent.objects.filter(pk=record.parent_id).values_list("host__name", flat=True).first()
    return run_code.take_here(str(record.config.get("workdir", "")), host=host or "")


def _run_for_experiment(agent_id: str, code: run_code.RecordedCode) -> None:
    """A research loop's experiment is a Run like any other (in /api/runs, under the loop's
    sweep), whose status then moves with its executor and queue request."""
    from scheduler_app.models import Run, Sweep

    agent = Agent.objects.select_related("parent").get(pk=agent_id)
    config = agent.config
    chat_session_id = agent.chat_session_id or (agent.parent and agent.parent.chat_session_id)
    run = Run.objects.create(
        name=agent.goal[:200] or "experiment",
        command=str(config.get("command", "")),
        workdir=str(config.get("workdir", "")),
        params=config.get("params") if isinstance(config.get("params"), dict) else {},
        gpu_required=config.get("gpu_required", 0),
        # A rerun goes where it went and reads its output as it did.
        executor_options={
            k: config[k] for k in ("backend", "slurm", "metrics_pattern") if k in config
        },
        sweep=Sweep.objects.filter(pk=agent.sweep).first() if agent.sweep else None,
        chat_session_id=chat_session_id,
        agent=agent,
        run_dir=str(run_dir_of(str(config.get("workdir", "")), agent.id)),
        **run_code.store_code(code),
    )
    agent.config = {**config, "run_id": run.id}
    agent.run = run.id
    agent.save(update_fields=["config", "run"])


_MOVED_FIELDS = [
    "status",
    "pid",
    "pid_start",
    "started_at",
    "finished_at",
    "error",
    "result",
    "updated_at",
]


def _event(agent_id: str, kind: str, payload: dict) -> dict:
    event = record_event(
        stream=AGENTS_STREAM, kind=kind, agent_id=agent_id, payload=payload, publish_live=False
    )
    return event.as_message()


@raising_store_unavailable
class DjangoRuntimeStore:
    # -- hosts -------------------------------------------------------------------------------

    def register_host(
        self,
        *,
        name: str,
        pid: int,
        gpus: list[dict],
        slurm: str | None = None,
        labels: dict | None = None,
    ) -> int:
        return host_services.register_host(
            name=name, pid=pid, gpus=gpus, slurm=slurm, labels=labels
        ).pk

    def record_heartbeat(self, *, host_id: int) -> bool:
        """True when the host had been declared dead meanwhile (its runs are to be re-adopted:
        readopt_lost_runs)."""
        was_dead = host_services.record_heartbeat(host_id=host_id)
        lifecycle.close_agentless_requests()
        return was_dead

    def record_foreign_gpu_use(self, *, host_id: int, processes: list[dict]) -> list[int]:
        return host_services.record_foreign_gpu_use(host_id=host_id, processes=processes)

    def mark_host_offline(self, *, host_id: int) -> None:
        host_services.mark_host_offline(host_id=host_id)

    def compact_old_metrics(self, *, older_than_days: float, stop=None) -> str:
        """Old metric points thinned (scheduler_app.metrics.compaction); what was done, in
        words. On the calling thread's own connection, closed after: a pass comes once a day.
        `stop` set: the pass ends after the series it is on."""
        before = timezone.now() - timedelta(days=older_than_days)
        try:
            done = compact_old_points(before=before, stretches=DEFAULT_STRETCHES, stop=stop)
        finally:
            connection.close()
        words = f"{done.deleted} points of {done.series} series"
        return f"{words} ({done.skipped})" if done.skipped else words

    @transaction.atomic
    def declare_dead_hosts(self, *, stale_after: float) -> list[dict]:
        """Hosts that stopped heart-beating are dead: what was placed on one and never started
        is queued again, its started runs are lost (scheduler_app.hosts.down), the other agents
        it ran are failed."""
        cutoff = timezone.now() - timedelta(seconds=stale_after)
        events = []
        dead = Host.objects.select_for_update(skip_locked=True).filter(
            status=HostStatus.ONLINE, last_heartbeat__lt=cutoff
        )
        for host in dead:
            host.status = HostStatus.DEAD
            host.save(update_fields=["status"])
            for agent_id, kind, payload in settle_runs_of_dead_host(host):
                events.append(_event(agent_id, kind, payload))
            for agent in Agent.objects.filter(host=host, status__in=LIVE_AGENT_STATUSES):
                cause = f"host {host.name} stopped heart-beating; its runagentd is gone"
                event = self.transition(
                    agent_id=agent.id,
                    status=AgentStatus.FAILED,
                    kind="failed",
                    payload={"error": cause},
                    error=cause,
                )
                if event:
                    events.append(event)
        return events

    # -- agents ------------------------------------------------------------------------------

    @transaction.atomic
    def create_agent(self, *, record: AgentRecord) -> dict:
        """Store a new agent; the event's agent_id is its final id (a clash gets a new one)."""
        agent = create_agent(
            first_id=record.id,
            role=record.role,
            cls_path=record.cls_path,
            parent_id=record.parent_id,
            goal=record.goal,
            config=record.config,
            host_id=record.host_id,
            chat_session_id=record.chat_session_id,
            **record.scope.as_dict(),
        )
        return _event(
            agent.id,
            "spawned",
            {
                "role": record.role,
                "parent_id": record.parent_id,
                "goal": record.goal,
                "cls_path": record.cls_path,
                **record.scope.as_dict(),
            },
        )

    def get_agent(self, *, agent_id: str) -> AgentRecord:
        return agent_record(Agent.objects.get(pk=agent_id))

    @transaction.atomic
    def transition(
        self,
        *,
        agent_id: str,
        status: AgentStatus,
        kind: str,
        payload: dict,
        pid: int | None = None,
        pid_start: int | None = None,
        error: str = "",
        traceback: str = "",
        result=None,
    ) -> dict | None:
        """Move a live agent to `status` and record `kind`. A finished agent never moves
        again, so however many paths report an end, exactly one terminal event is stored."""
        agent = Agent.objects.select_for_update().get(pk=agent_id)
        if agent.status in TERMINAL_AGENT_STATUSES:
            return None
        if agent.status == status and pid is None:  # a start report always carries a new pid
            return None
        now = timezone.now()
        # Its queue request and run move with it; an executor stopped before it started
        # was cancelled, and one whose run left no exit code is lost: it says so too.
        asked = status
        status = lifecycle.follow_agent(
            agent_id=agent_id,
            status=asked,
            result=result,
            error=error,
            previous=agent.status,
            backend=queue.SLURM if agent.config.get("backend") == queue.SLURM else "subprocess",
        )
        kind = str(status) if kind == str(asked) else kind
        oplog.agent_moved(agent, old=agent.status, new=status)
        agent_was_paused = agent.status == AgentStatus.PAUSED
        agent.status = status
        if pid is not None:
            agent.pid, agent.pid_start = pid, pid_start
            agent.started_at = agent.started_at or now
        if status in TERMINAL_AGENT_STATUSES:
            # An agent's result is its own JSON: a NaN in it (a run's last loss) is stored by name.
            agent.finished_at, agent.error, agent.result = now, error, json_safe(result)
            revoke_agent_tokens(agent_id=agent_id)  # its API token dies with it
        agent.save(update_fields=_MOVED_FIELDS)  # not the whole row (its config, its goal)
        if asked == AgentStatus.RUNNING and agent_was_paused:
            queue.notify_queue()  # its queued children, held while it was paused, may start
        if status == AgentStatus.FAILED:
            write_entry(
                type=EntryType.CONTEXT,
                agent_id=agent.id,
                project=agent.project,
                session=agent.session,
                sweep=agent.sweep,
                run=agent.run,
                role=agent.role,
                tags=["error"],
                data={"error": error, "traceback": traceback},
            )
        return _event(
            agent_id, kind, {**payload, "status": str(status), "parent_id": agent.parent_id}
        )

    def record_event(self, *, agent_id: str, kind: str, payload: dict) -> dict:
        if kind == "research_state":
            # The whole state goes to the loop's row; the feed gets a summary of it.
            from research_app.services import save_state

            return _event(agent_id, kind, save_state(agent_id, payload))
        if kind == "model_steps" and isinstance(payload.get("steps"), list):
            with transaction.atomic():  # the ledger's entries and their event together
                record_llm_steps(steps=payload["steps"], agent_id=agent_id)
                return _event(agent_id, kind, payload)
        if kind == "iteration" and isinstance(payload.get("iteration"), int):
            Agent.objects.filter(pk=agent_id).update(iteration=payload["iteration"])
        if (job := job_state_of_event(kind, payload)) is not None:
            job_id, running, reason = job
            with transaction.atomic():  # the row and its event together
                record_slurm_state(agent_id=agent_id, job_id=job_id, running=running, reason=reason)
                return _event(agent_id, kind, payload)
        return _event(agent_id, kind, payload)

    def mark_stopped(self, *, agent_id: str) -> dict | None:
        return self.transition(
            agent_id=agent_id, status=AgentStatus.STOPPED, kind="stopped", payload={}
        )

    def live_descendant_levels(self, *, agent_id: str) -> list[list[str]]:
        """Live agents below `agent_id`, grouped by depth, deepest first."""
        with connection.cursor() as cursor:
            cursor.execute(
                """
                WITH RECURSIVE tree(id, status, depth, path) AS (
                    SELECT id, status, 1, ARRAY[%s::varchar, id]
                    FROM agents_app_agent WHERE parent_id = %s
                    UNION ALL
                    SELECT a.id, a.status, t.depth + 1, t.path || a.id
                    FROM agents_app_agent a JOIN tree t ON a.parent_id = t.id
                    WHERE a.id <> ALL(t.path)  -- never loop on a parent cycle
                )
                SELECT id, depth FROM tree WHERE status = ANY(%s) ORDER BY depth DESC, id
                """,
                [agent_id, agent_id, [str(s) for s in LIVE_AGENT_STATUSES]],
            )
            rows = cursor.fetchall()
        levels: dict[int, list[str]] = {}
        for child_id, depth in rows:
            levels.setdefault(depth, []).append(child_id)
        return [levels[d] for d in sorted(levels, reverse=True)]

    @transaction.atomic
    def supersede(self, *, old_id: str, new_id: str, context: str) -> dict:
        Agent.objects.filter(pk=old_id).update(superseded_by_id=new_id)
        return _event(
            old_id, "superseded", {"old_id": old_id, "new_id": new_id, "context": context}
        )

    @transaction.atomic
    def cancel_queued_requests(self, *, parent_ids: list[str]) -> list[dict]:
        """Cancel the queued children of stopped agents; returns their `cancelled` events,
        for the daemon to publish as it does every other event."""
        queued = ScheduleRequest.objects.filter(parent_id__in=parent_ids)
        reason = "its parent was stopped"
        _, events = lifecycle.cancel_requests_and_events(queued, reason=reason, publish_live=False)
        return events

    @transaction.atomic
    def claim_pending_agents(self, *, host_id: int, limit: int) -> list[AgentRecord]:
        """Agents requested through the web that no daemon runs yet. SKIP LOCKED: two daemons
        never claim the same one."""
        pending = list(
            Agent.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(status=AgentStatus.IDLE, host__isnull=True, schedule_request__isnull=True)
            .exclude(role=AgentRole.EXECUTOR)  # executors start only through the queue
            .order_by("created_at")[:limit]
        )
        Agent.objects.filter(pk__in=[a.pk for a in pending]).update(host_id=host_id)
        return [agent_record(a) for a in pending]

    @transaction.atomic
    def readopt_lost_runs(self, *, host_id: int) -> list[dict]:
        """The runs this host's death left lost say running again; their events. The daemon
        then re-adopts them (lost_agents lists them again)."""
        return [
            _event(agent_id, kind, payload)
            for agent_id, kind, payload in readopt_runs_of_returned_host(host_id)
        ]

    def lost_agents(self, *, host_id: int) -> list[AgentRecord]:
        """Live agents this host ran before its runagentd died."""
        return [
            agent_record(a)
            for a in Agent.objects.filter(host_id=host_id, status__in=LIVE_AGENT_STATUSES)
        ]

    # -- the executor queue -------------------------------------------------------------------

    def create_queued_agent(self, *, record: AgentRecord, gpu_required) -> dict:
        """A new executor and its schedule request, in one transaction: an idle row with no
        host and no request is what an agent started from the web looks like, and any
        daemon would start it at once, without its GPUs. Returns {created, status, reason,
        event}. An experiment's code is recorded first, outside the transaction."""
        if "backend" not in record.config:  # where runs go unless they say (the deployment's)
            record = dataclasses.replace(
                record, config={**record.config, "backend": settings.AGENTSYS.run_backend}
            )
        experiment = isinstance(record.config.get("experiment"), dict)
        code = _experiment_code(record) if experiment else None
        with transaction.atomic():
            created = self.create_agent(record=record)
            if code is not None:
                _run_for_experiment(created["agent_id"], code)
            return {"created": created, **self._submit(created["agent_id"], gpu_required)}

    def find_child(self, *, parent_id: str, experiment: dict) -> str | None:
        """The child of `parent_id` spawned for `experiment` ({research_agent_id, iteration,
        index, launch}), if there is one."""
        return (
            Agent.objects.filter(parent_id=parent_id, config__experiment=experiment)
            .values_list("id", flat=True)
            .first()
        )

    def _submit(self, agent_id: str, gpu_required) -> dict:
        agent = Agent.objects.get(pk=agent_id)
        request = queue.submit(agent=agent, gpu_required=gpu_required)
        if request.status == RequestStatus.REJECTED:
            event = _event(
                agent_id,
                str(AgentStatus.REJECTED),
                {
                    "error": request.rejection_reason,
                    "status": str(AgentStatus.REJECTED),
                    "request_id": request.id,
                    "parent_id": agent.parent_id,
                },
            )
            return {"status": "rejected", "reason": request.rejection_reason, "event": event}
        event = _event(
            agent_id, "queued", {"request_id": request.id, "gpu_required": request.gpu_required}
        )
        return {"status": "queued", "reason": "", "event": event}

    @transaction.atomic
    def claim_queue(
        self,
        *,
        host_id: int,
        policy: str,
        shares: dict | None = None,
        slurm_slots: int = 0,
        started_pid: int | None = None,
        started_classes: frozenset[str] = frozenset(),
    ) -> list[AgentRecord]:
        """Executors this host starts now; each config carries its `gpu_indices`. With
        `slurm_slots`, also up to that many SLURM runs for it to submit. `started_pid`: the
        daemon runs agents of `started_classes` in its own process (pid): those placed on
        GPUs are started with the claim, their "started" events stored with it (a
        transaction fewer per run)."""
        placed = queue.claim(
            host_id=host_id,
            policy=policy_named(policy),
            shares=shares,
            started_pid=started_pid,
            started_classes=started_classes,
        )
        slurm = queue.claim_slurm(host_id=host_id, limit=slurm_slots)
        agents = Agent.objects.in_bulk([c.agent_id for c in [*placed, *slurm]])
        started = [
            agents[c.agent_id]
            for c in placed
            if started_pid
            and c.agent_id in agents
            and agents[c.agent_id].cls_path in started_classes
        ]
        events = record_events(
            stream=AGENTS_STREAM,
            events=[
                (
                    "started",
                    a.id,
                    {"pid": started_pid, "status": "running", "parent_id": a.parent_id},
                )
                for a in started
            ],
        )
        for agent in started:
            oplog.agent_moved(agent, old=AgentStatus.IDLE, new=AgentStatus.RUNNING)
        oplog.runs_moved(agent_ids=[agent.id for agent in started], status="running")
        started_events = {event.agent_id: event.as_message() for event in events}
        return [
            dataclasses.replace(
                agent_record(agents[c.agent_id]), started_event=started_events.get(c.agent_id)
            )
            for c in [*placed, *slurm]
            if c.agent_id in agents
        ]

    def agent_statuses(self, *, agent_ids: list[str]) -> dict[str, tuple[str, str]]:
        rows = Agent.objects.filter(pk__in=agent_ids).values_list("id", "status", "error")
        return {agent_id: (status, error) for agent_id, status, error in rows}

    # -- commands from the web ---------------------------------------------------------------

    @transaction.atomic
    def claim_commands(self, *, host_id: int, limit: int) -> list[CommandRecord]:
        """Pending commands for agents hosted here, or hosted by no live daemon (those are
        refused by the caller, so no request waits forever)."""
        mine_or_orphaned = (
            Q(agent__host_id=host_id)
            | Q(agent__host__isnull=True)
            | ~Q(agent__host__status=HostStatus.ONLINE)
        )
        commands = list(
            AgentCommand.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(mine_or_orphaned, status=CommandStatus.PENDING)
            .order_by("created_at")[:limit]
        )
        AgentCommand.objects.filter(pk__in=[c.pk for c in commands]).update(
            status=CommandStatus.DELIVERED, handled_at=timezone.now()
        )
        return [
            CommandRecord(id=c.pk, agent_id=c.agent_id, kind=c.kind, payload=c.payload)
            for c in commands
        ]

    def finish_command(self, *, command_id: int, delivered: bool, detail: str) -> None:
        AgentCommand.objects.filter(pk=command_id).update(
            status=CommandStatus.DELIVERED if delivered else CommandStatus.REFUSED,
            detail=detail,
        )

    def close(self) -> None:
        connections.close_all()
