import math
from pathlib import Path

import pytest

from agentsys.gpu_conflicts import RetryPolicy, is_gpu_conflict

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "gpu-h100"


def test_real_torch_oom_is_a_conflict():
    text = (FIXTURES / "oom.txt").read_text()
    assert is_gpu_conflict(text) == "cuda_out_of_memory"


def test_torch_oom_exception_name_alone_is_a_conflict():
    # The fixture's first line, and the forms torch's tracebacks print.
    assert is_gpu_conflict("torch OutOfMemoryError") == "torch_out_of_memory"
    assert is_gpu_conflict("raise torch.OutOfMemoryError(") == "torch_out_of_memory"
    assert is_gpu_conflict("torch.cuda.OutOfMemoryError: boom") == "torch_out_of_memory"


def test_no_cuda_gpus_is_a_configuration_error_not_a_conflict():
    # CUDA_VISIBLE_DEVICES named a GPU that does not exist: retrying cannot help.
    text = (FIXTURES / "bad-visible-devices.txt").read_text()
    assert "No CUDA GPUs are available" in text
    assert is_gpu_conflict(text) is None


@pytest.mark.parametrize(
    ("text", "name"),
    [
        (
            "RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable",
            "all_devices_busy",
        ),
        ("CUDA error: device is BUSY, try later", "cuda_error_busy"),
        ("OSError: [Errno 16] Device or resource busy: '/dev/nvidia0'", "device_busy"),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate", "cuda_out_of_memory"),
        ("cuda OUT OF MEMORY", "cuda_out_of_memory"),
        (
            "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling",
            "cublas_alloc_failed",
        ),
        ("jax: Failed to allocate memory on device 0", "device_alloc_failed"),
    ],
)
def test_conflict_patterns(text, name):
    assert is_gpu_conflict(f"step 10 loss 1.2\n{text}\n") == name


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Traceback...\nValueError: shapes do not match",
        "java.lang.OutOfMemoryError: Java heap space",
        "MemoryError",
        "CUDA error: an illegal memory access was encountered",
    ],
)
def test_other_failures_are_not_conflicts(text):
    assert is_gpu_conflict(text) is None


def test_retry_policy_defaults():
    policy = RetryPolicy()
    assert [policy.delay(attempt) for attempt in range(1, 8)] == [5, 10, 20, 40, 80, 120, 120]
    assert [policy.should_retry(attempt) for attempt in range(1, 5)] == [True, True, True, False]
    assert not policy.should_retry(0)


def test_retry_policy_caps_huge_attempts():
    assert RetryPolicy().delay(10_000) == 120.0
    assert RetryPolicy(max_delay=math.inf).delay(5) == 80.0


def test_retry_policy_without_retries():
    policy = RetryPolicy(max_retries=0)
    assert not policy.should_retry(1)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"max_retries": -1}, "max_retries"),
        ({"base_delay": -1.0}, "base_delay"),
        ({"max_delay": -0.5}, "max_delay"),
        ({"base_delay": math.nan}, "base_delay"),
        ({"factor": -2.0}, "factor"),
        ({"factor": 0.5}, "factor"),
    ],
)
def test_retry_policy_rejects_bad_values(changes, message):
    with pytest.raises(ValueError, match=message):
        RetryPolicy(**changes)


def test_delay_needs_an_attempt_from_one():
    with pytest.raises(ValueError, match="attempt"):
        RetryPolicy().delay(0)
