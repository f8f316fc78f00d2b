"""What runagentd is told at start (runtime_app's runagentd command builds it from the
configuration; tests build their own)."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentsys.deployment import Deployment


@dataclass(frozen=True)
class DaemonSettings:
    host_name: str
    declared_gpus: list[int] | None = None
    labels: dict = field(default_factory=dict)  # AGENTSYS_HOST_LABELS (agentsys.scheduling)
    heartbeat_interval: float = 5.0
    poll_interval: float = 5.0  # fallback for a lost notification (LISTEN wakes us at once)
    dead_host_after: float = 20.0  # a host silent this long is declared dead
    stop_grace: float = 5.0  # STOP → SIGTERM in the stop cascade
    shutdown_grace: float = 2.5  # runagentd must be gone within 5 s of SIGTERM
    listen_dsn: str | None = None  # libpq conninfo for LISTEN; None = poll only
    allowed_classes: frozenset[str] = frozenset()
    forkserver_preload: tuple[str, ...] = ()
    claim_batch: int = 20
    scheduler_policy: str = "backfill"
    queue_shares: dict = field(default_factory=dict)  # agentsys.fair_share, by account
    memory_factory: str = ""  # "module:attr"; empty = agents run without memory
    run_port_factory: str = ""  # "module:attr"; empty = agents reach no Run rows
    default_workdir: str = ""  # where executors run when their config names no workdir
    # The model, OpenCode server and credentials every agent gets (its config may override).
    deployment: Deployment = field(default_factory=Deployment)
    # Leave a detected GPU alone while processes this system did not start hold at least
    # this much memory on it (0 = never look).
    foreign_gpu_min_mb: int = 256
    # Submit SLURM runs: "auto" (if sbatch and the controller answer at start), "on"
    # (required: registering fails without them), "off".
    slurm: str = "off"
    slurm_max_jobs: int = 200  # SLURM jobs this daemon keeps submitted at once
    slurm_poll_interval: float = 1.0  # one squeue (+ sacct) for all of them, this often
    # Thin metric points stored more than this many days ago, once a day (0 = never).
    metrics_compact_after_days: float = 0.0
    extra: dict = field(default_factory=dict)
