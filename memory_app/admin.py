from django.contrib import admin
from django.template.loader import render_to_string
from django.utils.safestring import mark_safe

from common.admin_tools import json_display
from memory_app import services
from memory_app.models import MemoryEntry
from memory_app.rendering import entry_text, readable


@admin.register(MemoryEntry)
class MemoryEntryAdmin(admin.ModelAdmin):
    list_display = (
        "key",
        "type",
        "says",
        "agent_id",
        "target_id",
        "scope",
        "tag_list",
        "active",
        "created_at",
    )
    list_filter = ("type", "active", "role", "project")
    search_fields = ("key", "agent_id", "target_id", "project", "session", "sweep", "run")
    date_hierarchy = "created_at"
    actions = ["deactivate", "activate"]
    data_view = json_display("data")

    # A person writes the JSON of a new note; afterwards it is shown read-only and indented.
    def get_exclude(self, request, obj=None):
        return ("data",) if obj else ()

    def get_readonly_fields(self, request, obj=None):
        fixed = ("key", "updated_at", "acked_at")
        return (*fixed, "reads_as", "data_view") if obj else fixed

    @admin.display(description="says")
    def says(self, obj):
        return entry_text(obj.type, obj.data, limit=120)

    @admin.display(description="reads as")
    def reads_as(self, obj):
        # The template escapes every value; the pages show entries with the same include.
        shown = {"shown": readable(obj.type, obj.data), "compact": False}
        return mark_safe(render_to_string("memory_app/_entry_body.html", shown))  # noqa: S308

    @admin.display(description="scope")
    def scope(self, obj):
        return "/".join(p for p in (obj.project, obj.session, obj.sweep, obj.run) if p)

    @admin.display(description="tags")
    def tag_list(self, obj):
        return ", ".join(obj.tags)

    @admin.action(description="Deactivate selected memories (kept out of every prompt)")
    def deactivate(self, request, queryset):
        keys = list(queryset.values_list("pk", flat=True))
        self.message_user(request, f"Deactivated {services.set_active(keys=keys, active=False)}")

    @admin.action(description="Reactivate selected memories")
    def activate(self, request, queryset):
        keys = list(queryset.values_list("pk", flat=True))
        self.message_user(request, f"Reactivated {services.set_active(keys=keys, active=True)}")
