from django.contrib import admin

from common.admin_tools import MachineManagedAdmin, json_display
from sessions_app import services
from sessions_app.models import ChatMessage, ChatSession, ChatTurn


class MessageInline(admin.TabularInline):
    model = ChatMessage
    fields = ("seq", "role", "content", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(ChatSession)
class ChatSessionAdmin(admin.ModelAdmin):
    list_display = ("title", "id", "mode", "owner", "model_id", "archived", "updated_at")
    list_filter = ("mode", "archived", "model_provider")
    search_fields = ("id", "title", "opencode_session_id", "project")
    # Its default budget is set on its chat page or through the API, which check it.
    readonly_fields = ("created_at", "updated_at", "default_budget_view")
    exclude = ("default_budget",)
    default_budget_view = json_display("default_budget")
    inlines = [MessageInline]
    actions = ["archive", "unarchive"]

    @admin.action(description="Archive selected sessions")
    def archive(self, request, queryset):
        ids = list(queryset.values_list("pk", flat=True))
        n = services.set_archived(session_ids=ids, archived=True)
        self.message_user(request, f"Archived {n} sessions")

    @admin.action(description="Restore selected sessions from the archive")
    def unarchive(self, request, queryset):
        ids = list(queryset.values_list("pk", flat=True))
        n = services.set_archived(session_ids=ids, archived=False)
        self.message_user(request, f"Restored {n} sessions")


@admin.register(ChatMessage)
class ChatMessageAdmin(MachineManagedAdmin):
    """A chat's messages are written by the chat and its turns, in order (seq)."""

    list_display = ("session", "seq", "role", "short_content", "created_at")
    list_filter = ("role",)
    search_fields = ("content", "session__id", "session__title")
    raw_id_fields = ("session", "turn")
    readonly_fields = ("created_at", "parts_view")
    exclude = ("parts",)
    parts_view = json_display("parts")

    @admin.display(description="content")
    def short_content(self, obj):
        return obj.content[:100]


@admin.register(ChatTurn)
class ChatTurnAdmin(MachineManagedAdmin):
    """A streamed LLM response: its status and text are written as it streams."""

    list_display = ("id", "session", "status", "mode", "synthetic", "started_at", "finished_at")
    list_filter = ("status", "mode", "synthetic")
    search_fields = ("id", "session__id", "full_text", "error")
    raw_id_fields = ("session", "user_message")
    readonly_fields = ("started_at", "updated_at", "finished_at", "parts_view")
    exclude = ("parts",)
    parts_view = json_display("parts")
