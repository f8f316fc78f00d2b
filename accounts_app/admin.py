from django.contrib import admin, messages
from django.template.response import TemplateResponse

from accounts_app import services
from accounts_app.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    # Agents' tokens (a research loop's, owned by the agents service user) are listed too.
    list_display = (
        "name",
        "user",
        "agent_id",
        "prefix",
        "created_at",
        "last_used_at",
        "revoked_at",
    )
    list_filter = ("revoked_at", ("agent_id", admin.EmptyFieldListFilter))
    search_fields = ("name", "user__username", "prefix", "agent_id")
    actions = ["revoke"]

    def get_fields(self, request, obj=None):
        if obj is None:
            return ("user", "name")
        return ("user", "name", "agent_id", "prefix", "created_at", "last_used_at", "revoked_at")

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return ()
        return ("user", "agent_id", "prefix", "created_at", "last_used_at", "revoked_at")

    def save_model(self, request, obj, form, change):
        if not change:
            # The token exists only in this request: response_add shows it, once.
            request._new_api_token = services.fill_new_secret(obj)
        super().save_model(request, obj, form, change)

    def response_add(self, request, obj, post_url_continue=None):
        return TemplateResponse(
            request,
            "admin/accounts_app/apitoken/created.html",
            {
                **self.admin_site.each_context(request),
                "opts": self.opts,
                "token_row": obj,
                "token": request._new_api_token,
                "title": "API token created",
            },
        )

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        for row in queryset:
            services.revoke_token(token_id=row.pk)
        self.message_user(request, f"Revoked {queryset.count()} token(s).", messages.SUCCESS)
