from django.contrib import admin

from researchagent.admin_tools import json_display, run_service_action
from scheduler_app import selectors, services
from scheduler_app.models import GPU, Alert, Host, Run, ScheduleRequest, Sweep


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
        "daemon_pid",
        "daemon_started_at",
        "last_heartbeat",
        "created_at",
        "info_view",
    )
    exclude = ("info",)
    inlines = [GPUInline]
    actions = ["mark_offline"]
    info_view = json_display("info")

    @admin.display(boolean=True, description="heart-beating")
    def alive(self, obj):
        return selectors.host_is_alive(obj)

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
    readonly_fields = ("allocated_to", "allocated_at", "held_by_others_view")
    held_by_others_view = json_display("held_by_others")

    @admin.display(description="held by other processes")
    def held_by(self, obj):
        return ", ".join(
            f"{p.get('name') or '?'} (pid {p.get('pid')}, {p.get('used_mb') or '?'} MiB)"
            for p in obj.held_by_others
        )


@admin.register(ScheduleRequest)
class ScheduleRequestAdmin(admin.ModelAdmin):
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
    raw_id_fields = ("agent", "parent")
    readonly_fields = ("created_at", "started_at", "finished_at", "gpu_indices", "config_view")
    exclude = ("config",)
    date_hierarchy = "created_at"
    actions = ["cancel"]
    config_view = json_display("config")

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
    list_display = ("name", "id", "status", "chat_session", "created_at")
    list_filter = ("status",)
    search_fields = ("id", "name", "goal", "base_command")
    raw_id_fields = ("chat_session",)
    readonly_fields = ("created_at", "updated_at", "parameters_view")
    exclude = ("parameters",)
    parameters_view = json_display("parameters")


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
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
    raw_id_fields = ("sweep", "chat_session", "agent")
    readonly_fields = (
        "created_at",
        "started_at",
        "finished_at",
        "updated_at",
        "exit_code",
        "run_dir",
        "params_view",
        "executor_options_view",
    )
    exclude = ("params", "executor_options")
    date_hierarchy = "created_at"
    params_view = json_display("params")
    executor_options_view = json_display("executor_options")


@admin.register(Alert)
class AlertAdmin(admin.ModelAdmin):
    list_display = ("id", "severity", "status", "short_message", "agent_id", "run", "created_at")
    list_filter = ("severity", "status")
    search_fields = ("id", "message", "agent_id", "signature")
    raw_id_fields = ("run",)
    readonly_fields = ("created_at", "responded_at", "responded_by", "choices_view")
    exclude = ("choices",)
    actions = ["acknowledge"]
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
