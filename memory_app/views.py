"""The memory page: browse and search every entry by scope, type and tag; deactivate or
restore any of them; edit and delete memories (reflections, the agents' and people's own);
add a note. Agents' records (plans, results, alerts) are theirs: a person hides them from
prompts by deactivating them, and cannot rewrite them."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from agentsys.types import EntryType
from memory_app import selectors, services
from memory_app.models import MemoryEntry

PAGE = 50
ACTIVE = {"active": True, "inactive": False, "all": None}


def _filters(params) -> dict:
    scope = params.get("scope", "")
    return {
        "scope": scope if scope in selectors.SCOPE_FIELDS else "",
        "scope_value": params.get("scope_value", "").strip()[:100],
        "type": params.get("type", "") if params.get("type", "") in set(EntryType) else "",
        "tag": params.get("tag", "").strip()[:64],
        "q": params.get("q", "").strip()[:200],
        "active": params.get("active", "active") if params.get("active") in ACTIVE else "active",
    }


def _shown(entry: MemoryEntry) -> MemoryEntry:
    data = entry.data if isinstance(entry.data, dict) else {}
    entry.title = data.get("title") if isinstance(data.get("title"), str) else ""
    entry.editable = entry.type == EntryType.REFLECTION
    entry.edit_text = data.get("text") if isinstance(data.get("text"), str) else ""
    entry.goal = data.get("goal") if isinstance(data.get("goal"), str) else ""
    return entry


def memory_page(request: HttpRequest) -> HttpResponse:
    filters = _filters(request.GET)
    try:
        page = max(1, min(int(request.GET.get("page", "1")), 10_000))
    except ValueError:
        page = 1
    count, entries = selectors.browse(
        scope=filters["scope"],
        scope_value=filters["scope_value"],
        type=filters["type"],
        tag=filters["tag"],
        search=filters["q"],
        active=ACTIVE[filters["active"]],
        limit=PAGE + 1,
        offset=(page - 1) * PAGE,
    )
    context = {
        "nav": "memory",
        "entries": [_shown(e) for e in entries[:PAGE]],
        "count": count,
        "page": page,
        "has_next": len(entries) > PAGE,
        "filters": filters,
        "types": [t.value for t in EntryType],
        "scopes": selectors.SCOPE_FIELDS,
        "query": _without_page(request.GET),
        "project": settings.AGENTSYS.project,
    }
    if request.headers.get("HX-Request"):
        return render(request, "memory_app/_entries.html", context)
    return render(request, "memory_app/memory.html", context)


def _without_page(params) -> str:
    params = params.copy()
    params.pop("page", None)
    return params.urlencode()


def _back(request: HttpRequest) -> HttpResponse:
    query = request.POST.get("next", "")
    return redirect(reverse("memory") + (f"?{query}" if query else ""))


def _tags(raw: str) -> list[str]:
    return services.clean_tags([t.strip() for t in raw.split(",") if t.strip()])


@require_POST
def add_note(request: HttpRequest) -> HttpResponse:
    text = request.POST.get("text", "").strip()
    if not text:
        messages.error(request, "A note needs some text.")
        return _back(request)
    tags = _tags(request.POST.get("tags", ""))
    entry = services.create_memory(
        text=text[:20_000],
        title=request.POST.get("title", "").strip()[:200],
        tags=tags,
        project=settings.AGENTSYS.project,
        user=request.user,
    )
    messages.success(request, f"Note {entry.key} added: agents of {entry.project} will read it.")
    return _back(request)


@require_POST
def entry_action(request: HttpRequest, key: str, action: str) -> HttpResponse:
    if not MemoryEntry.objects.filter(pk=key).exists():
        raise Http404("No such memory entry")
    try:
        if action in ("deactivate", "restore"):
            services.set_active(keys=[key], active=action == "restore")
            done = "restored" if action == "restore" else "hidden from prompts"
            messages.success(request, f"{key} {done}.")
        elif action == "edit":
            services.update_memory(
                key=key,
                text=request.POST.get("text", "").strip()[:20_000] or None,
                title=request.POST.get("title", "").strip()[:200],
                tags=_tags(request.POST.get("tags", "")),
                user=request.user,
            )
            messages.success(request, f"{key} saved.")
        elif action == "delete":
            services.delete_memory(key=key)
            messages.success(request, f"{key} deleted.")
        else:
            raise Http404("No such action")
    except services.MemoryNotFound:
        messages.error(request, f"{key} is an agent's record: it can be hidden, not rewritten.")
    return _back(request)
