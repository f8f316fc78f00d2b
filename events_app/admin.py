from django.contrib import admin

from common.admin_tools import json_display
from events_app.models import Event, EventStream


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    """The event log is append-only: it can be read and searched, not edited."""

    list_display = ("id", "stream", "seq", "kind", "agent_id", "created_at")
    list_filter = ("stream", "kind")
    search_fields = ("agent_id", "kind", "stream")
    readonly_fields = ("id", "stream", "seq", "kind", "agent_id", "created_at", "payload_view")
    exclude = ("payload",)
    payload_view = json_display("payload")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(EventStream)
class EventStreamAdmin(admin.ModelAdmin):
    """How far each stream has got; changing it by hand would break replay, so it is read-only."""

    list_display = ("name", "last_seq")
    search_fields = ("name",)
    readonly_fields = ("name", "last_seq")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
