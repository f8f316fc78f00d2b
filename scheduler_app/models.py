"""The GPUs of the hosts (hosts_app), the executor queue, and the runs and sweeps people
launch."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q

from agentsys.types import EndState, RequestStatus, choices, new_id
from hosts_app.models import Host


def new_request_id() -> str:
    return new_id("sched")


def new_run_id() -> str:
    return new_id("run")


def new_sweep_id() -> str:
    return new_id("sweep")


def new_alert_id() -> str:
    return new_id("alert")


class GPUSource(models.TextChoices):
    NVML = "nvml", "NVML"
    NVIDIA_SMI = "nvidia-smi", "nvidia-smi"
    DECLARED = "declared", "Declared (AGENTSYS_GPUS)"


class GPU(models.Model):
    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="gpus")
    index = models.PositiveSmallIntegerField(help_text="CUDA device index on its host")
    uuid = models.CharField(max_length=80, blank=True)
    name = models.CharField(max_length=120, blank=True)
    memory_total_mb = models.PositiveIntegerField(null=True, blank=True)
    source = models.CharField(max_length=16, choices=GPUSource.choices)
    enabled = models.BooleanField(default=True, help_text="Offered to the scheduler")
    # The one request holding this GPU. A single column makes double-booking impossible.
    allocated_to = models.ForeignKey(
        "ScheduleRequest",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="allocated_gpus",
    )
    allocated_at = models.DateTimeField(null=True, blank=True)
    # Processes this system did not start hold memory on it (someone's notebook, another
    # scheduler): not offered until they let go. Refreshed with every heartbeat.
    held_by_others = models.JSONField(
        default=list, blank=True, help_text="Foreign processes on this GPU: [{pid, name, used_mb}]"
    )

    class Meta:
        ordering = ["host", "index"]
        constraints = [
            models.UniqueConstraint(fields=["host", "index"], name="gpu_host_index_unique"),
        ]
        indexes = [
            # The scheduler's claim: free, enabled GPUs of a host, lowest index first.
            models.Index(
                fields=["host", "index"],
                condition=Q(allocated_to__isnull=True, enabled=True),
                name="gpu_free_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.host.name}:gpu{self.index}"


class ScheduleRequest(models.Model):
    """An executor spawn waiting for GPUs. `agent` is created with the
    request, so the parent's handle keeps one id from queued to done."""

    id = models.CharField(primary_key=True, max_length=40, default=new_request_id)
    agent = models.OneToOneField(
        "agents_app.Agent",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="schedule_request",
    )
    agent_cls_path = models.CharField(max_length=200)
    goal = models.TextField(blank=True)
    parent = models.ForeignKey(
        "agents_app.Agent",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="child_requests",
    )
    config = models.JSONField(default=dict, blank=True)
    gpu_required = models.PositiveIntegerField(default=0)
    # Host labels it needs ({"gpu_model": "H100"}): only a host that has them claims it.
    requires = models.JSONField(default=dict, blank=True)
    # "slurm": SLURM places it (a daemon that runs SLURM submits it, booking no GPU of ours).
    backend = models.CharField(max_length=16, default="subprocess")
    status = models.CharField(
        max_length=16, choices=choices(RequestStatus), default=RequestStatus.QUEUED
    )
    rejection_reason = models.TextField(blank=True)
    host = models.ForeignKey(
        Host, null=True, blank=True, on_delete=models.SET_NULL, related_name="requests"
    )
    gpu_indices = ArrayField(models.PositiveSmallIntegerField(), default=list, blank=True)
    # Whose it is, for fair share (agentsys.fair_share): the username of the person who made
    # its run or the run's sweep; "" for a script's or an agent's own.
    account = models.CharField(max_length=150, blank=True, default="")
    placement_note = models.CharField(
        max_length=300,
        blank=True,
        help_text="Why it started ahead of an older request, e.g. 'backfilled: ends before "
        "gpu-c frees 8 GPUs at 14:05' (agentsys.backfill)",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]
        indexes = [
            # The tick: queued requests in FIFO order (small because it only holds the queue).
            models.Index(
                fields=["created_at", "id"],
                condition=Q(status="queued"),
                name="sched_queue_fifo_idx",
            ),
            # The claim's fair share: each account's oldest queued requests.
            models.Index(
                fields=["account", "created_at", "id"],
                condition=Q(status="queued"),
                name="sched_queue_account_idx",
            ),
            # GET /api/scheduler/queue?status=..., and stats by_status.
            models.Index(fields=["status", "-created_at"], name="sched_status_idx"),
            # cleanup_parent(parent) and ?parent_id=.
            models.Index(fields=["parent", "status"], name="sched_parent_idx"),
            # Per-host running requests (stats per host, restart re-adoption).
            models.Index(
                fields=["host"], condition=Q(status="running"), name="sched_host_running_idx"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.status}, {self.gpu_required} GPU)"


class SweepStatus(models.TextChoices):
    DRAFT = "draft", "Draft"
    RUNNING = "running", "Running"
    DONE = EndState.DONE.value, "Done"
    FAILED = EndState.FAILED.value, "Failed"
    STOPPED = EndState.STOPPED.value, "Stopped"


class SweepKind(models.TextChoices):
    RESEARCH = "research", "Research loop"  # the runs of a loop's experiments
    MANUAL = "manual", "Manual"  # made over the API by a person or a script


class Sweep(models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=new_sweep_id)
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=SweepKind.choices, default=SweepKind.MANUAL)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="sweeps",
        help_text="The person who made it; for a research loop's sweep, who started the loop",
    )
    created_by_agent = models.CharField(
        max_length=64,
        blank=True,
        editable=False,
        help_text="The research loop whose API token made it (its runs are the loop's to "
        "change: scheduler_app.loop_scope); empty: a person or a script",
    )
    goal = models.TextField(blank=True)
    base_command = models.TextField(blank=True)
    parameters = models.JSONField(default=dict, blank=True, help_text="Grid: {name: [values]}")
    metrics_pattern = models.TextField(
        blank=True, help_text="Read on each printed line of a run that has no pattern of its own"
    )
    run_backend = models.CharField(
        max_length=16, blank=True, help_text="Where its runs go unless they say (subprocess, slurm)"
    )
    slurm_options = models.JSONField(
        default=dict, blank=True, help_text="sbatch options of its SLURM runs"
    )
    run_env = models.JSONField(
        default=dict, blank=True, help_text="Environment variables of its runs, under their own"
    )
    run_venv = models.CharField(
        max_length=1000, blank=True, help_text="The virtual environment of runs naming none"
    )
    stop_when = models.JSONField(
        default=list,
        blank=True,
        help_text="Stop rules of its runs that bring none (agentsys.stop_rules)",
    )
    early_stop = models.JSONField(
        null=True,
        blank=True,
        help_text="Early stopping across its runs, e.g. ASHA (agentsys.asha); empty: none",
    )
    status = models.CharField(max_length=16, choices=SweepStatus.choices, default=SweepStatus.DRAFT)
    chat_session = models.ForeignKey(
        "sessions_app.ChatSession",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="sweeps",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"


class RunStatus(models.TextChoices):
    """A run's end states are its request's and its executor's (agentsys.types.EndState)."""

    READY = "ready", "Ready (not started)"
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    PAUSED = "paused", "Paused (its processes suspended; GPUs kept)"
    DONE = EndState.DONE.value, "Done (exit code 0)"
    FAILED = EndState.FAILED.value, "Failed"
    STOPPED = EndState.STOPPED.value, "Stopped (after it started)"
    CANCELLED = EndState.CANCELLED.value, "Cancelled (before it started)"
    REJECTED = EndState.REJECTED.value, "Rejected (can never run)"
    LOST = EndState.LOST.value, "Lost (ended with no exit code)"

    @classmethod
    def live(cls) -> list[RunStatus]:
        """Started and not ended: its processes exist (suspended, when paused)."""
        return [cls.RUNNING, cls.PAUSED]

    @classmethod
    def open(cls) -> list[RunStatus]:
        """In the queue or started, and not ended (a `ready` run has not been asked to start)."""
        return [cls.QUEUED, *cls.live()]


class Run(models.Model):
    """A command a person, a script or an agent launched."""

    id = models.CharField(primary_key=True, max_length=40, default=new_run_id)
    name = models.CharField(max_length=200)
    command = models.TextField()
    workdir = models.CharField(max_length=1000, blank=True)
    params = models.JSONField(default=dict, blank=True, help_text="Appended as --k=v")
    logged_params = models.JSONField(
        default=dict,
        blank=True,
        help_text="What the script logged itself: MLflow params and tags, W&B config, "
        "TensorBoard hparams",
    )
    tracker_urls = models.JSONField(
        default=dict, blank=True, help_text="Its online tracker runs: {tracker: url}"
    )
    gpu_required = models.PositiveIntegerField(default=0)
    requires = models.JSONField(
        default=dict,
        blank=True,
        help_text='Host labels it needs: {"gpu_model": "H100", "gpu_memory_gb": 40}',
    )
    executor_options = models.JSONField(
        default=dict,
        blank=True,
        help_text="Its executor's retries and loss thresholds; a rerun keeps them",
    )
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.READY)
    sweep = models.ForeignKey(
        Sweep, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    chat_session = models.ForeignKey(
        "sessions_app.ChatSession",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="runs",
    )
    agent = models.ForeignKey(
        "agents_app.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    created_by_agent = models.CharField(
        max_length=64,
        blank=True,
        editable=False,
        help_text="The agent whose API token made it (a research loop's MCP tools); empty: a "
        "person or a script",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        editable=False,
        on_delete=models.SET_NULL,
        related_name="runs_made",
        help_text="The person whose login or token made it; a loop's run is its sweep's person's",
    )
    auto_start = models.BooleanField(default=False)
    run_dir = models.CharField(max_length=1000, blank=True)
    slurm_job_id = models.BigIntegerField(
        null=True, blank=True, help_text="Its SLURM job, when SLURM runs it"
    )
    wait_reason = models.CharField(
        max_length=200, blank=True, help_text="Why it is still queued (SLURM's reason)"
    )
    exit_code = models.IntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    stopped_by = models.TextField(
        blank=True,
        help_text="The stop rule that ended it and the value that met it, e.g. "
        '"loss > 2.0 after step 100: 3.71 at step 140"',
    )
    # run.log as its host shipped it (RunLogChunk): for a web that cannot see that disk.
    log_shipped_bytes = models.BigIntegerField(
        default=0,
        editable=False,
        help_text="Bytes of run.log stored in the database (a prefix: its chunks are contiguous)",
    )
    log_capped = models.BooleanField(
        default=False,
        editable=False,
        help_text="The log's shipping stopped at AGENTSYS_LOG_DB_CAP_MB: the rest is only in "
        "run.log on the host that ran it",
    )
    # The code it runs (scheduler_app.runs.code): the workdir's commit and a patch of what was
    # not committed, recorded where the run was made; a host that does not see the workdir
    # checks them out in a folder of its own (code_dir) and runs there.
    code_commit = models.CharField(max_length=64, blank=True, editable=False)
    code_patch_digest = models.CharField(
        max_length=64, blank=True, editable=False, help_text="sha256 of its CodePatch"
    )
    code_remote = models.CharField(
        max_length=1000, blank=True, editable=False, help_text="Where a host fetches the commit"
    )
    code_host = models.CharField(
        max_length=64, blank=True, editable=False, help_text="The host whose disk holds the workdir"
    )
    code_subdir = models.CharField(
        max_length=1000, blank=True, editable=False, help_text="The workdir in its repository"
    )
    code_dir = models.CharField(
        max_length=1000,
        blank=True,
        editable=False,
        help_text="Where it ran, when not in the workdir: a checkout of the host's",
    )
    code_error = models.TextField(
        blank=True, editable=False, help_text="Why its code could not be recorded"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # GET /api/runs?status=..., newest first; L1 {{experiment_context}} counts.
            models.Index(fields=["status", "-created_at"], name="run_status_idx"),
            # A chat's runs for its experiment context.
            models.Index(fields=["chat_session", "-created_at"], name="run_chat_idx"),
            # A sweep's run counts, by status, and the sweep table's check that its columns
            # are unchanged (count, newest updated_at): read from the index alone, 10^5 runs
            # took 64 ms through the table, 15 from here (bench sweep_table_api_100000_runs_ms).
            models.Index(
                fields=["sweep", "status"], include=["updated_at"], name="run_sweep_status_idx"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"


class RunLogChunk(models.Model):
    """Bytes [offset, offset + len(data)) of a run's run.log, shipped by the host that runs
    it (agentsys.log_shipping) so that any web can serve the log. A run's chunks are
    contiguous from 0 to `Run.log_shipped_bytes`; a capped log's last chunk is a note."""

    id = models.BigAutoField(primary_key=True)
    # No index of its own: the unique (run, offset) below serves every lookup by run.
    run = models.ForeignKey(
        Run, on_delete=models.CASCADE, related_name="log_chunks", db_index=False
    )
    offset = models.BigIntegerField()
    data = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            # One chunk per byte position: a write repeated after a lost reply stores nothing.
            models.UniqueConstraint(fields=["run", "offset"], name="run_log_chunk_offset_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.run_id}@{self.offset}"


class CodePatch(models.Model):
    """Uncommitted changes runs recorded (`git diff --binary HEAD` with untracked files),
    stored once however many runs carry them."""

    digest = models.CharField(primary_key=True, max_length=64, help_text="sha256 of data")
    data = models.BinaryField()
    size = models.PositiveIntegerField()
    files = models.PositiveIntegerField(help_text="How many files it changes")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"patch {self.digest[:12]} ({self.files} files)"


class CodeBundle(models.Model):
    """A commit's history as a git bundle, made once by the host that saw its workdir, for
    the hosts that must check the commit out and have no remote to fetch it from. When an
    earlier bundle of the same repository holds an ancestor (`base`: a research loop commits
    every iteration), it holds only what came after it."""

    commit = models.CharField(primary_key=True, max_length=64)
    base = models.CharField(
        max_length=64, blank=True, help_text="The bundled commit it builds on; empty: all"
    )
    data = models.BinaryField()
    size = models.PositiveBigIntegerField()
    host = models.CharField(max_length=64, blank=True, help_text="Where it was made")
    repository = models.CharField(
        max_length=1000, blank=True, help_text="The top of the work tree it was made from"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            # The newest bundle of a repository: the base of its next one.
            models.Index(fields=["host", "repository", "-created_at"], name="code_bundle_repo_idx")
        ]

    def __str__(self) -> str:
        return f"bundle of {self.commit[:12]} ({self.size} bytes)"


class AlertSeverity(models.TextChoices):
    INFO = "info", "Info"
    WARNING = "warning", "Warning"
    CRITICAL = "critical", "Critical"


class AlertStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RESOLVED = "resolved", "Resolved"


class Alert(models.Model):
    """Something a person should see: a NaN loss, a spike, a retry on a busy GPU."""

    id = models.CharField(primary_key=True, max_length=40, default=new_alert_id)
    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="alerts"
    )
    agent_id = models.CharField(max_length=64, blank=True)
    severity = models.CharField(
        max_length=16, choices=AlertSeverity.choices, default=AlertSeverity.WARNING
    )
    message = models.TextField()
    signature = models.CharField(max_length=200, blank=True, help_text="De-duplication key")
    choices = models.JSONField(default=list, blank=True, help_text="Responses offered")
    status = models.CharField(
        max_length=16, choices=AlertStatus.choices, default=AlertStatus.PENDING
    )
    response = models.CharField(max_length=200, blank=True)
    responded_at = models.DateTimeField(null=True, blank=True)
    responded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    memory_key = models.CharField(max_length=12, blank=True, help_text="The ALERT memory entry")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # Open alerts, newest first (GET /api/alerts, dashboard).
            models.Index(
                fields=["-created_at"], condition=Q(status="pending"), name="alert_open_idx"
            ),
            # De-duplication: same agent and signature within the quiet window.
            models.Index(fields=["agent_id", "signature", "-created_at"], name="alert_dedup_idx"),
        ]

    def __str__(self) -> str:
        return f"[{self.severity}] {self.message[:60]}"


class MetricSeries(models.Model):
    """One numeric series an executor's run logged ("loss", "lr"), with a summary kept as its
    points arrive, so that a run's keys and last values are one indexed read. The points
    themselves are MetricPoint rows (agentsys run metrics are not memory entries)."""

    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.CASCADE, related_name="metric_series"
    )
    agent_id = models.CharField(max_length=64, help_text="The executor that logged it")
    key = models.CharField(max_length=200)
    source = models.CharField(
        max_length=20,
        blank=True,
        choices=[
            ("jsonl", "agent_metrics.jsonl"),
            ("tensorboard", "TensorBoard"),
            ("mlflow", "MLflow"),
            ("wandb", "W&B"),
            ("stdout", "printed lines"),
        ],
        help_text="Where the run logged it",
    )
    points = models.PositiveBigIntegerField(default=0)
    first_step = models.BigIntegerField(null=True, blank=True)
    last_step = models.BigIntegerField(null=True, blank=True)
    last_value = models.FloatField(null=True, blank=True, help_text="May be NaN or ±inf")
    min_value = models.FloatField(null=True, blank=True, help_text="Of the finite values")
    max_value = models.FloatField(null=True, blank=True, help_text="Of the finite values")
    non_finite = models.PositiveBigIntegerField(default=0, help_text="NaN and ±inf points")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["agent_id", "key"], name="metric_series_key_uniq")
        ]
        indexes = [
            # A run's keys; several runs' key K (compare).
            models.Index(fields=["run", "key"], name="metric_series_run_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.key} of {self.run_id or self.agent_id}"


class MetricPoint(models.Model):
    """One (step, value) of a series; NaN and ±inf are stored as they came."""

    id = models.BigAutoField(primary_key=True)
    # No index of its own: (series, step) below serves every lookup by series.
    series = models.ForeignKey(
        MetricSeries, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    step = models.BigIntegerField()
    value = models.FloatField()
    time = models.DateTimeField()

    class Meta:
        indexes = [
            # Key K from step S, in step order; the downsampling scan, which reads the index
            # alone (value included): among 10^8 points, reading a series of 10^6 through the
            # heap took the planner to a table scan (2.7 s; 0.25 s from the index).
            models.Index(
                fields=["series", "step"], include=["value"], name="metric_point_step_value_idx"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.step}: {self.value}"


# A model of this app kept in a module of its own (Django finds it through this import).
from scheduler_app.queued_ask_model import QueuedAsk  # noqa: E402, F401
from scheduler_app.sweep_rung_model import SweepRung  # noqa: E402, F401
