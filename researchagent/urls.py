from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from accounts_app import views as settings_views
from agents_app import views as agent_views
from events_app import sse
from ledger_app import views as ledger_views
from memory_app import views as memory_views
from research_app import controls as research_controls
from research_app import views as research_views
from researchagent import views
from researchagent.api import api
from scheduler_app import alert_views, sweep_views
from scheduler_app import views as run_views
from sessions_app import views as chat_views

admin.site.site_header = "AgentSys administration"
admin.site.site_title = "AgentSys admin"
admin.site.index_title = "Agents, queue, memory and chats"

urlpatterns = [
    path("", views.home, name="home"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("agents/", agent_views.agent_tree, name="agents"),
    path("agents/<str:agent_id>/<str:action>/", agent_views.agent_command, name="agent-command"),
    path("research/", research_views.loop_list, name="research-loops"),
    path("research/<str:agent_id>/", research_views.loop_detail, name="research-loop"),
    path(
        "research/<str:agent_id>/progress/",
        research_views.loop_progress,
        name="research-progress",
    ),
    path(
        "research/<str:agent_id>/diff/<str:commit>/",
        research_views.commit_diff,
        name="research-diff",
    ),
    path(
        "research/<str:agent_id>/<str:action>/",
        research_controls.loop_command,
        name="research-command",
    ),
    path("chat/", chat_views.chat_list, name="chats"),
    path("chat/new/", chat_views.new_chat, name="new-chat"),
    path("chat/<str:session_id>/", chat_views.chat, name="chat"),
    path("chat/<str:session_id>/send/", chat_views.send, name="chat-send"),
    path("chat/<str:session_id>/stop/", chat_views.stop, name="chat-stop"),
    path("chat/<str:session_id>/model/", chat_views.set_model, name="chat-model"),
    path("chat/<str:session_id>/budget/", chat_views.set_budget, name="chat-budget"),
    path("runs/", run_views.run_list, name="runs"),
    path("runs/compare/", run_views.compare, name="compare"),
    path("runs/<str:run_id>/", run_views.run_detail, name="run"),
    path("runs/<str:run_id>/<str:action>/", run_views.run_action, name="run-action"),
    path("sweeps/", sweep_views.sweep_list, name="sweeps"),
    path("sweeps/<str:sweep_id>/", sweep_views.sweep_detail, name="sweep"),
    path("sweeps/<str:sweep_id>/rungs/", sweep_views.sweep_rungs, name="sweep-rungs"),
    path("queue/", run_views.queue, name="queue"),
    path("queue/<str:request_id>/cancel/", run_views.queue_cancel, name="queue-cancel"),
    path("alerts/", alert_views.inbox, name="alerts"),
    path("alerts/<str:alert_id>/respond/", alert_views.respond, name="alert-respond"),
    path("memory/", memory_views.memory_page, name="memory"),
    path("memory/add/", memory_views.add_note, name="memory-add"),
    path("memory/<str:key>/<str:action>/", memory_views.entry_action, name="memory-action"),
    path("spend/", ledger_views.spend_page, name="spend"),
    path("settings/", settings_views.settings_page, name="settings"),
    path("settings/tokens/", settings_views.create_token, name="token-create"),
    path("settings/budget/", settings_views.save_budget, name="budget-default"),
    path(
        "settings/tokens/<int:token_id>/revoke/", settings_views.revoke_token, name="token-revoke"
    ),
    path(
        "accounts/login/",
        auth_views.LoginView.as_view(redirect_authenticated_user=True),
        name="login",
    ),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    # A streaming async view, outside django-ninja; before api/ so that it matches first.
    path("api/agents/events", sse.agent_events, name="agent-events"),
    path("api/", api.urls),
]
