"""What a run may require of a host (issue 24): the labels a host declares and its GPUs give
it, how a requirement matches them, and what is refused with the reason."""

import pytest

from agentsys.scheduling import (
    InvalidLabels,
    describe_requires,
    gpu_labels,
    host_meets,
    parse_labels,
    validate_requires,
)

H100 = {"gpu_model": "NVIDIA H100 80GB HBM3", "gpu_memory_gb": 79, "nvlink": True, "zone": "b"}


@pytest.mark.parametrize(
    ("requires", "meets"),
    [
        ({}, True),
        ({"gpu_model": "h100"}, True),  # found in the model name, whatever the case
        ({"gpu_model": "A100"}, False),
        ({"gpu_memory_gb": 40}, True),  # a number is a minimum
        ({"gpu_memory_gb": 80}, False),
        ({"nvlink": True}, True),
        ({"nvlink": False}, False),
        ({"zone": "b", "gpu_model": "H100"}, True),
        ({"zone": "b", "gpu_model": "V100"}, False),  # every label must hold
        ({"infiniband": True}, False),  # a label the host lacks never holds
        ({"gpu_model": 100}, False),  # a number against a name: no
    ],
)
def test_a_host_meets_what_a_run_requires(requires, meets):
    assert host_meets(H100, requires) is meets


def test_host_labels_parse_numbers_booleans_and_text():
    assert parse_labels(" gpu_model=H100 , gpu_memory_gb=80,nvlink=true, tflops=989.5 ") == {
        "gpu_model": "H100",
        "gpu_memory_gb": 80,
        "nvlink": True,
        "tflops": 989.5,
    }
    assert parse_labels("") == {}
    assert parse_labels("big=nan") == {"big": "nan"}  # not a number a requirement could meet


@pytest.mark.parametrize("text", ["gpu_model", "gpu model=H100", "=H100", "zone="])
def test_bad_host_labels_say_which(text):
    with pytest.raises(InvalidLabels):
        parse_labels(text)


def test_the_gpus_name_their_model_and_smallest_memory():
    cards = [
        {"name": "NVIDIA H100 80GB HBM3", "memory_total_mb": 81559},
        {"name": "NVIDIA H100 80GB HBM3", "memory_total_mb": 81559},
    ]
    # What NVML said of a real H100 (the device check): "80GB" as sold, so 80 fits it.
    assert gpu_labels(cards) == {"gpu_model": "NVIDIA H100 80GB HBM3", "gpu_memory_gb": 85}
    t4 = {"name": "Tesla T4", "memory_total_mb": 15360}  # sold as 16GB
    mixed = [{"name": "A", "memory_total_mb": 40960}, t4]
    assert gpu_labels(mixed) == {"gpu_memory_gb": 16}  # no one model to name; the smallest
    declared = {"index": 0, "name": "declared GPU", "memory_total_mb": None, "source": "declared"}
    assert gpu_labels([declared]) == {}  # AGENTSYS_GPUS says how many, nothing of what


@pytest.mark.parametrize(
    ("value", "complaint"),
    [
        ([], "must be an object"),
        ({"gpu model": "x"}, "letters, digits"),
        ({"x" * 64: 1}, "1 to 63 characters"),
        ({"gpu_model": ["H100"]}, "a string, a number or true/false"),
        ({"gpu_model": None}, "a string, a number or true/false"),
        ({"gpu_memory_gb": float("inf")}, "finite"),
        ({"gpu_model": ""}, "1 to 200 characters"),
        ({f"l{i}": 1 for i in range(17)}, "at most 16"),
    ],
)
def test_requirements_that_cannot_be_used_are_refused_saying_why(value, complaint):
    with pytest.raises(InvalidLabels, match=complaint):
        validate_requires(value)


def test_requirements_read_as_a_person_would_write_them():
    assert describe_requires({"gpu_model": "H100", "gpu_memory_gb": 40, "nvlink": True}) == (
        "gpu_memory_gb≥40, gpu_model~H100, nvlink=true"
    )
