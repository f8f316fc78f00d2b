from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from agents_app import sse
from researchagent import views
from researchagent.api import api

admin.site.site_header = "AgentSys administration"
admin.site.site_title = "AgentSys admin"
admin.site.index_title = "Agents, queue, memory and chats"

urlpatterns = [
    path("", views.home, name="home"),
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
