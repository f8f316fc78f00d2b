"""An executor's retry and loss-alert options, checked before its run starts."""

from __future__ import annotations

from agentsys.gpu_conflicts import RetryPolicy
from agentsys.metrics import AnomalyThresholds


class BadExecutorOptions(ValueError):
    """Retry or threshold options that cannot work: the run fails before it starts, saying
    which, rather than at its first GPU conflict or loss."""


def options_from(config: dict) -> tuple[RetryPolicy, AnomalyThresholds]:
    thresholds = config.get("thresholds", {})
    try:
        if not isinstance(thresholds, dict):
            raise TypeError(f"thresholds must be an object, got {thresholds!r}")
        for name in ("max_retries", "retry_base_delay"):
            value = config.get(name, 0)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{name} must be a number, got {value!r}")
        policy = RetryPolicy(
            max_retries=int(config.get("max_retries", 3)),
            base_delay=float(config.get("retry_base_delay", 5.0)),
        )
        return policy, AnomalyThresholds(**thresholds)
    except (TypeError, ValueError) as error:
        raise BadExecutorOptions(f"bad executor options: {error}") from None
