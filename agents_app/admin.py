from django import forms
from django.contrib import admin
from django.template.response import TemplateResponse

from agents_app import services
from agents_app.models import Agent, AgentCommand
from agentsys.types import CommandKind, SteerUrgency
from common.admin_tools import MachineManagedAdmin, json_display, run_service_action

_APPLIED_BY_DAEMON = " (runagentd carries it out; the agent's events show the outcome)"


def _command_action(kind: CommandKind, label: str):
    @admin.action(description=f"{label} selected agents")
    def action(modeladmin, request, queryset):
        run_service_action(
            modeladmin,
            request,
            queryset,
            lambda agent: services.request_agent_command(
                agent_id=agent.pk, kind=kind, user=request.user
            ),
            f"{label} requested{_APPLIED_BY_DAEMON}",
        )

    action.__name__ = f"request_{kind.value}"
    return action


class SteerForm(forms.Form):
    context = forms.CharField(widget=forms.Textarea, max_length=services.MAX_STEER_CONTEXT)
    urgency = forms.ChoiceField(
        choices=[(u.value, u.value) for u in SteerUrgency],
        initial=SteerUrgency.PRIORITY,
        help_text="critical: restart with the steer in the goal; priority: into the running "
        "agent's buffer; message: into its inbox",
    )


@admin.action(description="Steer selected agents")
def steer(modeladmin, request, queryset):
    form = SteerForm(request.POST if "apply" in request.POST else None)
    if form.is_valid():
        data = form.cleaned_data
        run_service_action(
            modeladmin,
            request,
            queryset,
            lambda agent: services.steer_agent(
                agent_id=agent.pk,
                context=data["context"],
                urgency=data["urgency"],
                user=request.user,
            ),
            f"Steer ({data['urgency']}) sent",
        )
        return None
    context = {
        **modeladmin.admin_site.each_context(request),
        "agents": queryset,
        "form": form,
        "title": "Steer agents",
    }
    return TemplateResponse(request, "admin/agents_app/steer.html", context)


class ChildInline(admin.TabularInline):
    model = Agent
    fk_name = "parent"
    fields = ("id", "role", "status", "goal", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True
    verbose_name_plural = "children"

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Agent)
class AgentAdmin(MachineManagedAdmin):
    """Agents are started through the API (an executor through the GPU queue) and move by
    their daemon; a person stops, pauses, resumes or steers them with the actions."""

    list_display = (
        "id",
        "role",
        "status",
        "short_goal",
        "parent",
        "scope",
        "host",
        "iteration",
        "created_at",
    )
    list_filter = ("status", "role", "host", "project")
    search_fields = ("id", "goal", "cls_path", "project", "session", "sweep", "run")
    readonly_fields = (
        "created_at",
        "started_at",
        "finished_at",
        "updated_at",
        "heartbeat_at",
        "config_view",
        "result_view",
    )
    exclude = ("config", "result")
    date_hierarchy = "created_at"
    inlines = [ChildInline]
    actions = [
        _command_action(CommandKind.STOP, "Stop"),
        _command_action(CommandKind.PAUSE, "Pause"),
        _command_action(CommandKind.RESUME, "Resume"),
        steer,
    ]
    config_view = json_display("config")
    result_view = json_display("result")

    @admin.display(description="goal")
    def short_goal(self, obj):
        return obj.goal[:80]

    @admin.display(description="scope")
    def scope(self, obj):
        return "/".join(p for p in (obj.project, obj.session, obj.sweep, obj.run) if p)


@admin.register(AgentCommand)
class AgentCommandAdmin(MachineManagedAdmin):
    """Commands are made by the agent actions and the API, and handled by runagentd."""

    list_display = ("id", "agent", "kind", "status", "requested_by", "created_at", "handled_at")
    list_filter = ("kind", "status")
    search_fields = ("agent__id", "detail")
    readonly_fields = ("created_at", "handled_at", "payload_view")
    exclude = ("payload",)
    payload_view = json_display("payload")
