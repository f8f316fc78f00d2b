from django.contrib import admin

from ledger_app.models import SpendEntry


@admin.register(SpendEntry)
class SpendEntryAdmin(admin.ModelAdmin):
    list_display = (
        "created_at",
        "kind",
        "model",
        "input_tokens",
        "output_tokens",
        "usd",
        "gpu_seconds",
        "host",
        "loop_id",
        "run_id",
        "chat_session_id",
        "user_id",
    )
    list_filter = ("kind", "model", "host")
    search_fields = ("key", "loop_id", "run_id", "sweep_id", "chat_session_id")
    date_hierarchy = "created_at"
    # A ledger is written by what spent, never by hand.
    readonly_fields = [f.name for f in SpendEntry._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
