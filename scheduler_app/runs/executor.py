"""A run's executor: the ExecutorAgent that runs its command, as create_agent's keywords, and
the options a run takes from its sweep. Its own module because both ways of making runs use
it (scheduler_app.runs.launch, one at a time, and scheduler_app.runs.batch, many at once, which
create_run also inserts through), so neither needs to import the other's module for it."""

from __future__ import annotations

from django.conf import settings

from agentsys.registry import EXECUTOR_AGENT
from agentsys.types import AgentRole
from scheduler_app.models import Run


def executor_of(run: Run) -> dict:
    """create_agent's keywords for the executor of `run` (its workdir set): its
    `executor_options` (retries, thresholds, backend) go into the executor's config; the
    run's own fields (command, workdir, params, GPUs) always win over them."""
    return {
        "role": AgentRole.EXECUTOR,
        "cls_path": EXECUTOR_AGENT,
        "goal": run.name,
        "config": {
            # A run that names no backend goes where the deployment sends runs.
            "backend": settings.AGENTSYS.run_backend,
            **run.executor_options,
            "command": run.command,
            "workdir": run.workdir,
            "params": run.params,
            "gpu_required": run.gpu_required,
            "requires": run.requires,
            "run_id": run.id,
        },
        "project": settings.AGENTSYS.project,
        "run": run.id,
        "chat_session_id": run.chat_session_id,
    }


def sweep_options(sweeps) -> dict[str, dict]:
    """What the runs of each of `sweeps` (a queryset) take from it, by sweep id."""
    rows = sweeps.values_list(
        "pk",
        "metrics_pattern",
        "run_backend",
        "slurm_options",
        "run_env",
        "run_venv",
        "stop_when",
        "early_stop",
    )
    return {
        pk: {
            "metrics_pattern": pattern,
            "backend": backend,
            "slurm": slurm,
            "env": env,
            "venv": venv,
            "stop_when": stop_when,
            "early_stop": early_stop,  # the sweep's alone: a run cannot bring its own
        }
        for pk, pattern, backend, slurm, env, venv, stop_when, early_stop in rows
    }


def inherit_options(options: dict, inherited: dict | None) -> dict:
    """A run's executor options over what its sweep gives (sweep_options), the sweep's unset
    ones left out. Its env goes under the run's own, variable by variable."""
    if not inherited:
        return options
    merged = {**{k: v for k, v in inherited.items() if v}, **options}
    if inherited.get("env") and options.get("env"):
        merged["env"] = {**inherited["env"], **options["env"]}
    return merged
