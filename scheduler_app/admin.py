from django.contrib import admin

from common.admin_tools import MachineManagedAdmin, json_display, run_service_action
from hosts_app.liveness import host_is_alive
from hosts_app.models import Host
from scheduler_app import services
from scheduler_app.models import (
    GPU,
    Alert,
    MetricPoint,
    MetricSeries,
    QueuedAsk,
    Run,
    RunStatus,
    ScheduleRequest,
    Sweep,
    SweepRung,
)
from scheduler_app.runs import launch as runs

# What runagentd detects about a GPU and what the queue books on it; `enabled` (offer it to
# the scheduler or not) is the one thing a person decides.
GPU_MANAGED = (
    "host",
    "index",
    "uuid",
    "name",
    "memory_total_mb",
    "source",
    "allocated_to",
    "allocated_at",
)


class GPUInline(admin.TabularInline):
    model = GPU
    fields = ("index", "name", "memory_total_mb", "source", "enabled", "allocated_to")
    readonly_fields = ("index", "name", "memory_total_mb", "source", "allocated_to")
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Host)
class HostAdmin(admin.ModelAdmin):
    """A host registers itself and heart-beats: everything on it is read-only but its GPUs'
    `enabled` switch. A host whose daemon is gone is marked offline with the action."""

    list_display = (
        "name",
        "hostname",
        "status",
        "alive",
        "gpu_count",
        "daemon_pid",
        "last_heartbeat",
    )
    list_filter = ("status",)
    search_fields = ("name", "hostname")
    readonly_fields = (
        "name",
        "hostname",
        "status",
        "daemon_pid",
        "daemon_started_at",
        "last_heartbeat",
        "version",
        "created_at",
        "labels_view",
        "info_view",
    )
    exclude = ("info", "labels")
    inlines = [GPUInline]

    def has_add_permission(self, request, obj=None):
        return False  # runagentd registers its host

    actions = ["mark_offline"]
    info_view = json_display("info")
    labels_view = json_display("labels")

    @admin.display(boolean=True, description="heart-beating")
    def alive(self, obj):
        return host_is_alive(obj)

    @admin.display(description="GPUs")
    def gpu_count(self, obj):
        return obj.gpus.count()

    @admin.action(description="Mark selected hosts offline (their daemon is gone)")
    def mark_offline(self, request, queryset):
        run_service_action(
            self,
            request,
            queryset,
            lambda host: services.mark_host_offline(host_id=host.pk),
            "Marked offline",
        )


@admin.register(GPU)
class GPUAdmin(admin.ModelAdmin):
    list_display = (
        "__str__",
        "name",
        "memory_total_mb",
        "source",
        "enabled",
        "allocated_to",
        "allocated_at",
        "held_by",
    )
    list_filter = ("host", "source", "enabled")
    search_fields = ("host__name", "name", "uuid")
    exclude = ("held_by_others",)
    readonly_fields = (*GPU_MANAGED, "held_by_others_view")
    held_by_others_view = json_display("held_by_others")

    def has_add_permission(self, request, obj=None):
        return False  # detected (or declared) by runagentd

    @admin.display(description="held by other processes")
    def held_by(self, obj):
        return ", ".join(
            f"{p.get('name') or '?'} (pid {p.get('pid')}, {p.get('used_mb') or '?'} MiB)"
            for p in obj.held_by_others
        )


@admin.register(ScheduleRequest)
class ScheduleRequestAdmin(MachineManagedAdmin):
    """Requests are submitted by the services and placed by the claim; cancel is the action."""

    list_display = (
        "id",
        "status",
        "gpu_required",
        "gpu_indices",
        "host",
        "agent",
        "parent",
        "short_goal",
        "created_at",
    )
    list_filter = ("status", "host", "gpu_required")
    search_fields = ("id", "goal", "agent__id", "parent__id", "agent_cls_path")
    readonly_fields = (
        "created_at",
        "started_at",
        "finished_at",
        "gpu_indices",
        "backend",
        "requires_view",
        "config_view",
    )
    exclude = ("config", "requires")
    date_hierarchy = "created_at"
    actions = ["cancel"]
    config_view = json_display("config")
    requires_view = json_display("requires")

    @admin.display(description="goal")
    def short_goal(self, obj):
        return obj.goal[:80]

    @admin.action(description="Cancel selected queued requests")
    def cancel(self, request, queryset):
        run_service_action(
            self,
            request,
            queryset,
            lambda r: services.cancel_request(request_id=r.pk),
            "Cancelled",
        )


@admin.register(Sweep)
class SweepAdmin(admin.ModelAdmin):
    list_display = ("name", "id", "kind", "status", "chat_session", "created_at")
    list_filter = ("status", "kind")
    search_fields = ("id", "name", "goal", "base_command")
    raw_id_fields = ("chat_session", "created_by")
    readonly_fields = (
        "status",
        "kind",
        "created_by",
        "created_at",
        "updated_at",
        "parameters_view",
        "slurm_options_view",
        "run_env_view",
        "stop_when_view",
        "early_stop_view",
    )
    exclude = ("parameters", "slurm_options", "run_env", "stop_when", "early_stop")
    parameters_view = json_display("parameters")
    slurm_options_view = json_display("slurm_options")
    run_env_view = json_display("run_env")
    stop_when_view = json_display("stop_when")
    early_stop_view = json_display("early_stop")


# A run's outcome and its link to the executor and the queue: only the services move them.
RUN_MANAGED = (
    "id",
    "status",
    "agent",
    "created_by_agent",
    "run_dir",
    "code_commit",
    "code_patch_digest",
    "code_remote",
    "code_host",
    "code_subdir",
    "code_dir",
    "code_error",
    "slurm_job_id",
    "wait_reason",
    "exit_code",
    "error",
    "created_at",
    "started_at",
    "finished_at",
    "updated_at",
    "params_view",
    "requires_view",
    "executor_options_view",
    "logged_params_view",
    "tracker_urls_view",
)
# What a person asks for; fixed once the run has been started (rerun makes a new one).
RUN_INPUTS = ("name", "command", "workdir", "gpu_required", "sweep", "chat_session")


def _run_action(service, verb: str, description: str):
    @admin.action(description=description)
    def action(modeladmin, request, queryset):
        run_service_action(modeladmin, request, queryset, lambda r: service(run_id=r.pk), verb)

    action.__name__ = service.__name__
    return action


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    """A person writes a run's command; its status, exit code and executor are the system's.
    Start, stop and rerun are actions through the same services as the API."""

    list_display = (
        "name",
        "id",
        "status",
        "exit_code",
        "gpu_required",
        "sweep",
        "agent",
        "created_at",
    )
    list_filter = ("status", "auto_start")
    search_fields = ("id", "name", "command", "run_dir")
    raw_id_fields = ("sweep", "chat_session")
    exclude = (
        "params",
        "requires",
        "executor_options",
        "auto_start",
        "logged_params",
        "tracker_urls",
    )
    date_hierarchy = "created_at"
    params_view = json_display("params")
    requires_view = json_display("requires")
    executor_options_view = json_display("executor_options")
    logged_params_view = json_display("logged_params")
    tracker_urls_view = json_display("tracker_urls")
    actions = [
        _run_action(runs.start_run, "Queued", "Start selected runs (they never started)"),
        _run_action(runs.stop_run, "Stop requested", "Stop selected runs"),
        _run_action(runs.rerun, "Rerun as new runs", "Rerun selected runs"),
    ]

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return ("status",)
        if obj.status != RunStatus.READY:
            return (*RUN_MANAGED, *RUN_INPUTS)
        return RUN_MANAGED


@admin.register(Alert)
class AlertAdmin(MachineManagedAdmin):
    """Alerts are raised by executors; a person answers them with the actions (as with
    POST /api/alerts/{id}/respond)."""

    list_display = ("id", "severity", "status", "short_message", "agent_id", "run", "created_at")
    list_filter = ("severity", "status")
    search_fields = ("id", "message", "agent_id", "signature")
    readonly_fields = ("created_at", "responded_at", "responded_by", "choices_view")
    exclude = ("choices",)
    actions = ["acknowledge", "stop"]
    choices_view = json_display("choices")

    @admin.display(description="message")
    def short_message(self, obj):
        return obj.message[:100]

    @admin.action(description="Acknowledge selected alerts")
    def acknowledge(self, request, queryset):
        run_service_action(
            self,
            request,
            queryset,
            lambda a: services.respond_to_alert(
                alert_id=a.pk,
                response="acknowledge"
                if not a.choices or "acknowledge" in a.choices
                else a.choices[0],
                user=request.user,
            ),
            "Acknowledged",
        )

    @admin.action(description="Answer selected alerts with stop (stops what raised them)")
    def stop(self, request, queryset):
        run_service_action(
            self,
            request,
            queryset,
            lambda a: services.answer_alert(alert_id=a.pk, response="stop", user=request.user),
            "Stopped",
        )


@admin.register(MetricSeries)
class MetricSeriesAdmin(MachineManagedAdmin):
    """A run's series as its executor stored them; the run page charts them."""

    list_display = ("key", "run", "agent_id", "points", "last_step", "last_value", "updated_at")
    list_select_related = ("run",)
    search_fields = ("key", "run__id", "run__name", "agent_id")


@admin.register(SweepRung)
class SweepRungAdmin(MachineManagedAdmin):
    """Who reached which rung of a sweep's early stopping, and what was decided there."""

    list_display = ("sweep", "run", "rung", "value", "kept", "cutoff", "at")
    list_filter = ("kept",)
    list_select_related = ("sweep", "run")
    search_fields = ("sweep__id", "run__id", "run__name")
    raw_id_fields = ("sweep", "run")


@admin.register(QueuedAsk)
class QueuedAskAdmin(MachineManagedAdmin):
    """Each person's queued GPUs as fair share last summed them (every few seconds)."""

    list_display = ("account", "gpus", "summed_at")
    search_fields = ("account",)


@admin.register(MetricPoint)
class MetricPointAdmin(MachineManagedAdmin):
    """Millions of rows: no full count, no sorting but by the index."""

    list_display = ("series", "step", "value", "time")
    list_select_related = ("series",)
    show_full_result_count = False
    ordering = ("series", "step")
    raw_id_fields = ("series",)


from scheduler_app import admin_stored_bytes  # noqa: E402,F401  (registers its admins)
