"""The admin's read-only views of the bytes hosts store for each other (issue 24): run logs
shipped through PostgreSQL, and the code patches and git bundles a host without the workdir
checks out. Their bytes are never shown whole: sizes, and a patch's beginning."""

from django.contrib import admin
from django.utils.html import format_html

from common.admin_tools import MachineManagedAdmin
from scheduler_app.models import CodeBundle, CodePatch, RunLogChunk

PATCH_SHOWN = 20_000  # characters of a patch on its change page


@admin.register(RunLogChunk)
class RunLogChunkAdmin(MachineManagedAdmin):
    """Bytes [offset, offset + size) of a run's run.log, as its host shipped them."""

    list_display = ("run", "offset", "size", "created_at")
    list_select_related = ("run",)
    search_fields = ("run__id", "run__name")
    raw_id_fields = ("run",)
    exclude = ("data",)
    readonly_fields = ("size", "created_at")
    show_full_result_count = False
    ordering = ("run", "offset")

    @admin.display(description="bytes")
    def size(self, obj):
        return len(obj.data or b"")


@admin.register(CodePatch)
class CodePatchAdmin(MachineManagedAdmin):
    """Uncommitted changes runs recorded, stored once per content."""

    list_display = ("digest", "files", "size", "created_at")
    search_fields = ("digest",)
    exclude = ("data",)
    readonly_fields = ("digest", "files", "size", "created_at", "text")

    @admin.display(description="patch (its beginning)")
    def text(self, obj):
        shown = bytes(obj.data or b"")[:PATCH_SHOWN].decode("utf-8", "replace")
        return format_html('<pre style="white-space: pre-wrap">{}</pre>', shown)


@admin.register(CodeBundle)
class CodeBundleAdmin(MachineManagedAdmin):
    """A commit's history as a git bundle (only what came after `base`, when it has one)."""

    list_display = ("commit", "base", "size", "host", "repository", "created_at")
    list_filter = ("host",)
    search_fields = ("commit", "repository")
    exclude = ("data",)
    readonly_fields = ("commit", "base", "size", "host", "repository", "created_at")
