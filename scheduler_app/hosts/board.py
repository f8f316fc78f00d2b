"""Reads for the hosts board (the queue page's host cards, the overview's strip, GET /api/hosts):
each host with its GPUs, what holds each GPU and the runs it runs without a GPU.

Two queries whatever the size of the fleet or the queue: the hosts (each with its GPU-less
runs gathered by PostgreSQL into an array), and every GPU with the run of the request that
holds it. A query per GPU or per host would cost 64 round trips on 8 hosts of 8 GPUs."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.contrib.postgres.expressions import ArraySubquery
from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce, JSONObject
from django.utils import timezone
from django.utils.text import slugify

from agentsys.types import RequestStatus
from hosts_app.liveness import host_is_alive
from hosts_app.models import Host, HostStatus
from scheduler_app.models import GPU, Run
from scheduler_app.queue.claims import SLURM

GPU_LESS_SHOWN = 10  # GPU-less runs named on a card; the count says how many more

# Cards in this order: hosts that take work first, then those that may come back.
STATE_ORDER = {"online": 0, "silent": 1, "offline": 2, "dead": 3}


@dataclass
class GPUCell:
    index: int
    name: str  # the model, e.g. "NVIDIA H100 80GB HBM3"
    uuid: str
    source: str  # nvml, nvidia-smi, declared
    memory_total_mb: int | None
    enabled: bool
    request_id: str | None  # the request holding it
    run_id: str | None  # that request's run, when it has one
    run_name: str
    held_by_others: list[dict]  # foreign processes: {pid, name, used_mb}

    @property
    def state(self) -> str:
        """busy (a request of ours), foreign (someone else's process), off, or free."""
        if self.request_id:
            return "busy"
        if self.held_by_others:
            return "foreign"
        return "free" if self.enabled else "off"

    @property
    def memory(self) -> str:
        """80 GB, 7.5 GB; empty when the GPU did not say (a declared one)."""
        if not self.memory_total_mb:
            return ""
        gb = self.memory_total_mb / 1024
        return f"{gb:.0f} GB" if gb >= 10 else f"{gb:.1f} GB"

    @property
    def holder(self) -> str:
        """What holds it, in words: the run, "held by others: …", "disabled" or "free"."""
        if self.request_id:
            return f"{self.run_name} ({self.run_id})" if self.run_id else self.request_id
        if self.held_by_others:
            return f"held by others: {others_words(self.held_by_others)}"
        return "free" if self.enabled else "disabled"


def others_words(processes: list[dict]) -> str:
    """`python (pid 4242, 3000 MB), a process (pid 7)`: who holds a GPU we did not give."""
    words = []
    for process in processes:
        detail = [f"pid {process.get('pid', '?')}"]
        if process.get("used_mb") is not None:
            detail.append(f"{process['used_mb']} MB")
        words.append(f"{process.get('name') or 'a process'} ({', '.join(detail)})")
    return ", ".join(words)


@dataclass
class HostCard:
    host: Host
    state: str  # online | silent (online but no heartbeat lately) | offline | dead
    heartbeat_age: timedelta | None
    gpus: list[GPUCell] = field(default_factory=list)
    gpu_less_runs: list[dict] = field(default_factory=list)  # {id, name}, oldest first
    gpu_less_total: int = 0

    @property
    def name(self) -> str:
        return self.host.name

    @property
    def anchor(self) -> str:
        """The card's id on the queue page (the overview's strip links to it)."""
        return f"host-{slugify(self.host.name) or self.host.pk}"

    @property
    def alive(self) -> bool:
        """Takes work now: it says online and heart-beat lately."""
        return self.state == "online"

    @property
    def slurm(self) -> bool:
        return bool((self.host.info or {}).get("slurm"))

    @property
    def labels(self) -> dict:
        """What runs may require of it (agentsys.scheduling.host_meets)."""
        return self.host.labels if isinstance(self.host.labels, dict) else {}

    @property
    def declared_labels(self) -> list[tuple[str, str]]:
        """Its labels but those the card says already (its GPUs' model and memory)."""
        names = {gpu.name for gpu in self.gpus}
        said = {
            "gpu_model": names.pop() if len(names) == 1 else None,
            "gpu_memory_gb": self.labels.get("gpu_memory_gb") if self.model else None,
        }
        return [
            (key, str(value).lower() if isinstance(value, bool) else str(value))
            for key, value in sorted(self.labels.items())
            if said.get(key) != value
        ]

    @property
    def total(self) -> int:
        """GPUs offered to the scheduler (a disabled one is shown, not counted)."""
        return sum(1 for gpu in self.gpus if gpu.enabled)

    @property
    def free(self) -> int:
        return sum(1 for gpu in self.gpus if gpu.state == "free")

    @property
    def busy(self) -> int:
        return self.total - self.free

    @property
    def disabled(self) -> int:
        return sum(1 for gpu in self.gpus if not gpu.enabled)

    @property
    def model(self) -> str:
        """`NVIDIA H100 80GB HBM3 · 80 GB` when every GPU is that one (said once on the card
        instead of on each row); empty when they differ."""
        kinds = {(gpu.name, gpu.memory) for gpu in self.gpus}
        if len(kinds) != 1:
            return ""
        name, memory = kinds.pop()
        return " · ".join(part for part in (name, memory) if part)

    @property
    def gpu_less_more(self) -> int:
        return self.gpu_less_total - len(self.gpu_less_runs)


def host_state(host: Host, *, now: datetime) -> str:
    if host.status == HostStatus.ONLINE:
        return "online" if host_is_alive(host, now=now) else "silent"
    return str(host.status)


def host_cards(*, now: datetime | None = None) -> list[HostCard]:
    """Every host, online ones first, each with its GPUs and what holds them."""
    now = now or timezone.now()
    cards = {}
    for host in _hosts_with_gpu_less_runs():
        age = now - host.last_heartbeat if host.last_heartbeat else None
        cards[host.pk] = HostCard(
            host=host,
            state=host_state(host, now=now),
            heartbeat_age=age,
            gpu_less_runs=host.gpu_less_runs,
            gpu_less_total=host.gpu_less_total,
        )
    for gpu in _gpus_with_holders():
        card = cards.get(gpu.host_id)
        if card is not None:  # a host registered between the two reads: next render
            card.gpus.append(
                GPUCell(
                    index=gpu.index,
                    name=gpu.name,
                    uuid=gpu.uuid,
                    source=gpu.source,
                    memory_total_mb=gpu.memory_total_mb,
                    enabled=gpu.enabled,
                    request_id=gpu.allocated_to_id,
                    run_id=gpu.run_id,
                    run_name=gpu.run_name or "",
                    held_by_others=gpu.held_by_others or [],
                )
            )
    return sorted(cards.values(), key=lambda c: (STATE_ORDER.get(c.state, 9), c.name))


def _hosts_with_gpu_less_runs():
    """The hosts, each with `gpu_less_runs` ([{id, name}]) and `gpu_less_total`: the runs
    placed on it that booked no GPU (SLURM's are SLURM's, not the host's)."""
    placed = Run.objects.filter(
        agent__schedule_request__host=OuterRef("pk"),
        agent__schedule_request__status=RequestStatus.RUNNING,
        agent__schedule_request__gpu_indices=[],
    ).exclude(agent__schedule_request__backend=SLURM)
    shown = placed.order_by("created_at", "id").values(j=JSONObject(id="id", name="name"))
    total = placed.order_by().values("agent__schedule_request__host").annotate(n=Count("pk"))
    return Host.objects.annotate(
        gpu_less_runs=ArraySubquery(shown[:GPU_LESS_SHOWN]),
        gpu_less_total=Coalesce(Subquery(total.values("n")), 0),
    )


def _gpus_with_holders():
    """Every GPU, with `run_id` and `run_name` of the run whose request holds it."""
    holder = Run.objects.filter(agent_id=OuterRef("allocated_to__agent_id")).order_by("-created_at")
    return GPU.objects.order_by("host_id", "index").annotate(
        run_id=Subquery(holder.values("id")[:1]),
        run_name=Subquery(holder.values("name")[:1]),
    )
