"""Shared admin pieces: JSON shown read-only and indented, and service-backed actions."""

from __future__ import annotations

import json

from django.contrib import admin, messages
from django.utils.html import format_html


def pretty_json(value) -> str:
    return format_html(
        '<pre style="white-space:pre-wrap;max-width:60em">{}</pre>',
        json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str),
    )


def json_display(field: str):
    """An admin read-only field showing the JSON in `field` indented:
    `config_view = json_display("config")`, then list `config_view` in readonly_fields."""

    @admin.display(description=field.replace("_", " "))
    def show(self, obj):
        return pretty_json(getattr(obj, field))

    return show


def run_service_action(modeladmin, request, queryset, service, verb: str) -> None:
    """Call `service(obj)` for each selected row; report successes and refusals separately."""
    done, refused = 0, []
    for obj in queryset:
        try:
            service(obj)
            done += 1
        except Exception as exc:  # a refusal names its reason; show it and go on
            refused.append(f"{obj.pk}: {exc}")
    if done:
        modeladmin.message_user(request, f"{verb}: {done}", messages.SUCCESS)
    for line in refused:
        modeladmin.message_user(request, line, messages.WARNING)


class MachineManagedAdmin(admin.ModelAdmin):
    """Rows the system writes (statuses, pids, exit codes, GPU bookings, heartbeats): the admin
    shows them and offers actions that go through the services, but no form can change them
    or add one by hand. The change page is then a read-only view, and a POST to it is 403."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False
