"""Telling a run that failed because its GPU was taken from one that failed on its own, and how
long to wait before trying it again."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

# (name, pattern), matched case-insensitively; the first match names the conflict.
# Out-of-memory counts as a conflict because on a shared host it usually means another
# process holds the memory (the fixture's torch message names such a process). A run that is
# simply too big for the card fails the same way on every try, which the bounded
# RetryPolicy turns into a failure.
#
# Deliberately absent: "No CUDA GPUs are available". torch says that when
# CUDA_VISIBLE_DEVICES names a GPU that does not exist or hides them all: a configuration
# error that fails identically on every retry, so it must surface, not be retried.
GPU_CONFLICT_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE))
    for name, pattern in (
        ("all_devices_busy", r"all CUDA-capable devices are busy or unavailable"),
        ("cuda_error_busy", r"CUDA error:.*busy"),
        ("device_busy", r"device or resource busy"),
        ("cuda_out_of_memory", r"CUDA out of memory"),
        ("torch_out_of_memory", r"torch(?:\.cuda)?[. ]OutOfMemoryError"),
        ("cublas_alloc_failed", r"CUBLAS_STATUS_ALLOC_FAILED"),
        ("device_alloc_failed", r"failed to allocate memory on device"),
    )
)


def is_gpu_conflict(text: str) -> str | None:
    """The name of the first conflict pattern found in `text` (say, the tail of run.log)."""
    for name, pattern in GPU_CONFLICT_PATTERNS:
        if pattern.search(text):
            return name
    return None


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded exponential back-off for runs that lost their GPU.

    Attempts count retries from 1: delay(1) = base_delay, each next one `factor` times longer,
    never more than max_delay; should_retry is false after max_retries."""

    max_retries: int = 3
    base_delay: float = 5.0
    factor: float = 2.0
    max_delay: float = 120.0

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must not be negative, got {self.max_retries}")
        for name in ("base_delay", "max_delay"):
            value = getattr(self, name)
            if math.isnan(value) or value < 0:
                raise ValueError(f"{name} must be a non-negative number of seconds, got {value}")
        if math.isnan(self.factor) or self.factor < 1:
            raise ValueError(f"factor must be at least 1 (delays never shrink), got {self.factor}")

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry number `attempt` (1 for the first retry)."""
        if attempt < 1:
            raise ValueError(f"attempt counts from 1, got {attempt}")
        try:
            delay = self.base_delay * self.factor ** (attempt - 1)
        except OverflowError:
            return self.max_delay
        return min(delay, self.max_delay)

    def should_retry(self, attempt: int) -> bool:
        """Whether retry number `attempt` (1 for the first retry) may happen."""
        return 1 <= attempt <= self.max_retries
