"""Settings: the person's API tokens (create with a name, shown once; revoke), the default
budget of the loops they start, the model the agents use, whether OpenCode answers and how
the workdir's MCP servers fare in it."""

from __future__ import annotations

from asgiref.sync import async_to_sync
from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from accounts_app import selectors, services
from accounts_app.models import ApiToken
from agentsys.mcp.status import mcp_check
from common.budget_form import BudgetForm, budget_words
from common.environment import dotenv_path
from common.opencode_status import opencode_check


def settings_page(
    request: HttpRequest,
    *,
    new_token: str = "",
    budget_form: BudgetForm | None = None,
    status: int = 200,
) -> HttpResponse:
    config = settings.AGENTSYS
    opencode = async_to_sync(opencode_check)()
    mcp = async_to_sync(mcp_check)(
        config.opencode_url,
        settings.AGENTSYS_WORKDIR,
        username=config.opencode_username,
        password=config.opencode_password,
        opencode_ok=opencode["ok"],
    )
    context = {
        "nav": "settings",
        # A person's own tokens: agents' ones belong to the agents service user, never shown here.
        "tokens": selectors.tokens(username=request.user.get_username(), people_only=True),
        "new_token": new_token,
        "budget_form": budget_form or BudgetForm(budget=selectors.default_budget(request.user)),
        "budget_now": budget_words(selectors.default_budget(request.user)),
        "model": f"{config.model_provider}/{config.model_id}",
        "opencode": opencode,
        "mcp": mcp,
        "project": config.project,
        "policy": config.scheduler_policy,
        # Say where the settings come from only where that is true: many hosts have no .env.
        "dotenv": dotenv_path() if dotenv_path().is_file() else None,
    }
    return render(request, "accounts_app/settings.html", context, status=status)


@require_POST
def create_token(request: HttpRequest) -> HttpResponse:
    try:
        row, token = services.create_token(user=request.user, name=request.POST.get("name", ""))
    except services.TokenError as error:
        messages.error(request, f"No token made: {error}.")
        return settings_page(request, status=400)
    messages.success(request, f"Token “{row.name}” made. Copy it now: it is not shown again.")
    # Rendered, not redirected: the token exists only in this response.
    response = settings_page(request, new_token=token)
    response["Cache-Control"] = "no-store"
    return response


@require_POST
def revoke_token(request: HttpRequest, token_id: int) -> HttpResponse:
    # Only the person's own tokens: another user's id answers as if it did not exist.
    row = ApiToken.objects.filter(pk=token_id, user=request.user).first()
    if row is None:
        messages.error(request, "No such token of yours.")
    else:
        services.revoke_token(token_id=row.pk)
        messages.success(request, f"Token “{row.name}” revoked: requests with it now get 401.")
    return redirect("settings")


@require_POST
def save_budget(request: HttpRequest) -> HttpResponse:
    """The person's default budget; a bad one re-renders the form as typed, saying why."""
    form = BudgetForm(request.POST)
    if form.is_valid():
        try:
            saved = services.set_default_budget(user=request.user, budget=form.budget)
        except services.BudgetRefused as refused:
            form.add_error(None, str(refused))
        else:
            messages.success(request, f"Default budget of your loops: {budget_words(saved)}.")
            return redirect("settings")
    messages.error(request, "Default budget not saved: see the fields below.")
    return settings_page(request, budget_form=form, status=400)
