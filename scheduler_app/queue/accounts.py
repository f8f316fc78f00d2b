"""Whose a queued request is, for fair share (agentsys.fair_share): the username of the person
who made its run (their login or token), or of the run's sweep (a research loop's runs are its
sweep's: the person who started the loop); "" for a run no person made."""

from __future__ import annotations

from collections.abc import Sequence

from django.contrib.auth import get_user_model

from scheduler_app.models import Run, Sweep


def accounts_of(runs: Sequence[Run]) -> dict[str, str]:
    """run id -> its account, in two queries whatever the number of runs."""
    people = {run.created_by_id for run in runs if run.created_by_id}
    sweeps = {run.sweep_id for run in runs if run.sweep_id and not run.created_by_id}
    names = dict(get_user_model().objects.filter(pk__in=people).values_list("pk", "username"))
    by_sweep = dict(
        Sweep.objects.filter(pk__in=sweeps, created_by__isnull=False).values_list(
            "pk", "created_by__username"
        )
    )
    return {
        run.pk: names.get(run.created_by_id) or by_sweep.get(run.sweep_id) or "" for run in runs
    }


def person_of(request):
    """The person an API call acts for, to record on what it makes: the logged-in person or
    a person's token; None for an agent's token (its loop's runs are its sweep's person's)
    and for the deployment's token."""
    user = getattr(request, "user", None)
    if getattr(request, "agent_id", "") or not getattr(user, "is_authenticated", False):
        return None
    return user if getattr(user, "pk", None) else None
