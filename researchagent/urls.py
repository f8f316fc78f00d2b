from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

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
    path("api/", api.urls),
]
