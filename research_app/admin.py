from django.contrib import admin, messages
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from common.admin_tools import MachineManagedAdmin, json_display
from common.status_words import promise_word
from research_app import services
from research_app.forms import StartResearchForm
from research_app.models import ResearchLoop


@admin.register(ResearchLoop)
class ResearchLoopAdmin(MachineManagedAdmin):
    list_display = ("agent_id", "goal_short", "status", "iteration", "sweep_link", "created_at")
    search_fields = ("agent__id", "goal")
    readonly_fields = (
        "agent_link",
        "goal",
        "status",
        "iteration",
        "sweep_link",
        "plan",
        "history_view",
        "reflection",
        "opencode_session_id",
        "settings_view",
        "state_view",
        "created_at",
        "updated_at",
    )
    exclude = ("agent", "sweep", "settings", "state", "chat_session")
    settings_view = json_display("settings")
    state_view = json_display("state")
    change_list_template = "admin/research_app/researchloop/change_list.html"

    @admin.display(description="history")
    def history_view(self, obj):
        steps = [h for h in obj.state.get("history") or [] if isinstance(h, dict)]
        if not steps:
            return "-"
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    step.get("iteration"),
                    step.get("phase"),
                    promise_word(step.get("promise")) or "-",
                    f"{float(step.get('duration_s') or 0):.1f} s",
                    str(step.get("summary") or "")[:200],
                    ", ".join(step.get("runs") or []) or "-",
                    "; ".join(step.get("errors") or []) or "-",
                )
                for step in steps
            ),
        )
        head = "".join(
            f"<th>{name}</th>"
            for name in ("#", "step", "promise", "took", "summary", "runs", "errors")
        )
        return format_html("<table><tr>{}</tr>{}</table>", format_html(head), rows)

    @admin.display(description="goal")
    def goal_short(self, obj):
        return obj.goal[:80]

    @admin.display(description="status")
    def status(self, obj):
        return obj.agent.status

    @admin.display(description="agent")
    def agent_link(self, obj):
        url = reverse("admin:agents_app_agent_change", args=[obj.agent_id])
        return format_html('<a href="{}">{}</a>', url, obj.agent_id)

    @admin.display(description="sweep")
    def sweep_link(self, obj):
        if not obj.sweep_id:
            return "-"
        url = reverse("admin:scheduler_app_run_changelist") + f"?sweep__id__exact={obj.sweep_id}"
        return format_html('<a href="{}">{} (runs)</a>', url, obj.sweep_id)

    def get_urls(self):
        start = path("start/", self.admin_site.admin_view(self.start_view), name="research_start")
        return [start, *super().get_urls()]

    def start_view(self, request):
        if not request.user.is_staff:
            return redirect("admin:login")
        form = StartResearchForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            try:
                loop = services.start_research(**form.cleaned_data, started_by=request.user)
            except services.ResearchRefused as refused:
                form.add_error(None, str(refused))
            else:
                self.message_user(
                    request, f"Research loop {loop.agent_id} started", messages.SUCCESS
                )
                return redirect("admin:research_app_researchloop_change", loop.agent_id)
        context = {
            **self.admin_site.each_context(request),
            "title": "Start a research loop",
            "form": form,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/research_app/start.html", context)
