"""GPU detection for a host: NVML first, `nvidia-smi` as the fallback, or GPUs declared by hand.

Everything here is safe on a machine without GPUs: detection returns [] quickly and never
raises, and every parser skips (and logs) lines it cannot read instead of failing.
"""

from __future__ import annotations

import logging
import re
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

SMI_TIMEOUT_SECONDS = 10.0
QUERY_GPU_ARGS = (
    "nvidia-smi",
    "--query-gpu=index,uuid,name,memory.total",
    "--format=csv,noheader,nounits",
)
QUERY_COMPUTE_APPS_ARGS = (
    "nvidia-smi",
    "--query-compute-apps=pid,process_name,gpu_uuid,used_gpu_memory",
    "--format=csv",
)
BYTES_PER_MIB = 1024 * 1024

# Runs a command and returns its stdout; raises OSError (FileNotFoundError when the program is
# missing) or subprocess.SubprocessError (timeout, non-zero exit) when it cannot.
CommandRunner = Callable[[Sequence[str], float], str]


@dataclass(frozen=True)
class GpuInfo:
    index: int
    uuid: str
    name: str
    memory_total_mb: int | None
    source: str  # "nvml" | "nvidia-smi" | "declared"


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    name: str
    gpu_uuid: str
    used_mb: int | None  # None where the driver reports "[N/A]"


def run_command(args: Sequence[str], timeout: float) -> str:
    completed = subprocess.run(
        list(args), capture_output=True, text=True, timeout=timeout, check=True
    )
    return completed.stdout


def detect_gpus(
    declared: list[int] | None = None,
    *,
    runner: CommandRunner = run_command,
    read_nvml: Callable[[], list[GpuInfo]] | None = None,
) -> list[GpuInfo]:
    """The GPUs of this host, in NVML/nvidia-smi index order (PCI bus order).

    `declared` wins when given (hosts where detection is impossible or unwanted). Otherwise
    NVML, then `nvidia-smi`; any failure of either yields [] rather than an exception."""
    if declared is not None:
        return declared_gpus(declared)
    try:
        return (read_nvml or read_nvml_gpus)()
    except Exception as error:
        # pynvml missing, libnvidia-ml.so missing (no driver) and driver errors all land here.
        logger.debug("NVML unavailable (%s); trying nvidia-smi", error)
    try:
        output = runner(QUERY_GPU_ARGS, SMI_TIMEOUT_SECONDS)
    except (OSError, subprocess.SubprocessError) as error:
        logger.debug("nvidia-smi unavailable (%s); no GPUs detected", error)
        return []
    return parse_query_gpu_csv(output)


def declared_gpus(indices: Iterable[int]) -> list[GpuInfo]:
    return [
        GpuInfo(
            index=index,
            uuid=f"declared-{index}",
            name="declared GPU",
            memory_total_mb=None,
            source="declared",
        )
        for index in indices
    ]


def read_nvml_gpus(nvml: Any = None) -> list[GpuInfo]:
    """GPUs through NVML; raises whatever NVML raises (detect_gpus turns that into a fallback).

    `nvml` is the pynvml module, or a stand-in for it in tests."""
    if nvml is None:
        import pynvml as nvml
    nvml.nvmlInit()
    try:
        gpus = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            total_bytes = nvml.nvmlDeviceGetMemoryInfo(handle).total
            gpus.append(
                GpuInfo(
                    index=index,
                    uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                    name=_text(nvml.nvmlDeviceGetName(handle)),
                    memory_total_mb=int(total_bytes) // BYTES_PER_MIB,
                    source="nvml",
                )
            )
        return gpus
    finally:
        nvml.nvmlShutdown()


def _text(value: str | bytes) -> str:
    # Older pynvml releases return bytes; current ones return str.
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def gpu_processes(runner: CommandRunner = run_command) -> list[GpuProcess]:
    """Compute processes on this host's GPUs (all users' where the driver shows them); []
    when nvidia-smi is missing or fails."""
    try:
        output = runner(QUERY_COMPUTE_APPS_ARGS, SMI_TIMEOUT_SECONDS)
    except (OSError, subprocess.SubprocessError) as error:
        logger.debug("nvidia-smi unavailable (%s); no GPU processes listed", error)
        return []
    return parse_compute_apps(output)


def holding_processes(
    processes: Iterable[GpuProcess], *, own_pids: set[int] = frozenset(), min_used_mb: int = 256
) -> list[GpuProcess]:
    """The processes, not started by this system, that make their GPU busy.

    Processes under `min_used_mb` (a display server, a monitoring probe) do not make a GPU busy.
    A process whose memory the driver will not report ("[N/A]") counts as holding the GPU:
    we cannot tell it is small, and starting a run next to it risks an OOM."""
    return [
        process
        for process in processes
        if process.pid not in own_pids
        and (process.used_mb is None or process.used_mb >= min_used_mb)
    ]


def busy_gpu_uuids(
    processes: Iterable[GpuProcess], *, own_pids: set[int], min_used_mb: int = 256
) -> set[str]:
    """UUIDs of GPUs held by processes this system did not start."""
    return {
        p.gpu_uuid for p in holding_processes(processes, own_pids=own_pids, min_used_mb=min_used_mb)
    }


_LIST_GPUS_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: ([^)\s]+)\)\s*$")


def parse_list_gpus(text: str) -> list[GpuInfo]:
    """`nvidia-smi -L`: "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)". It carries no memory
    size. The indented MIG lines under a GPU are not GPUs and are skipped."""
    gpus = []
    for line in text.splitlines():
        if not line.strip() or line[:1].isspace():
            continue
        match = _LIST_GPUS_LINE.match(line)
        if match is None:
            logger.warning("nvidia-smi -L: skipped unreadable line %r", line)
            continue
        index, name, uuid = match.groups()
        gpus.append(GpuInfo(int(index), uuid, name, None, "nvidia-smi"))
    return gpus


def parse_query_gpu_csv(text: str) -> list[GpuInfo]:
    """`nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader,nounits`."""
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = [field.strip() for field in line.split(",")]
        if len(fields) < 4 or not fields[0].isdigit() or not fields[1]:
            logger.warning("nvidia-smi --query-gpu: skipped unreadable line %r", line)
            continue
        # A comma inside the name would split it: the name is everything between uuid and memory.
        name = ", ".join(fields[2:-1])
        gpus.append(GpuInfo(int(fields[0]), fields[1], name, _mebibytes(fields[-1]), "nvidia-smi"))
    return gpus


def parse_smi_xml(text: str) -> list[GpuInfo]:
    """`nvidia-smi -q -x`: one <gpu> per device; index from <minor_number> (its position
    where the driver says N/A), memory from <fb_memory_usage><total>."""
    try:
        # nvidia-smi's own output, not untrusted input; expat does not fetch the external DTD.
        root = ET.fromstring(text)  # noqa: S314
    except ET.ParseError as error:
        logger.warning("nvidia-smi -q -x: unreadable XML (%s)", error)
        return []
    gpus = []
    for position, gpu in enumerate(root.iter("gpu")):
        uuid = (gpu.findtext("uuid") or "").strip()
        if not uuid:
            logger.warning("nvidia-smi -q -x: skipped a <gpu> without a uuid")
            continue
        minor = (gpu.findtext("minor_number") or "").strip()
        gpus.append(
            GpuInfo(
                index=int(minor) if minor.isdigit() else position,
                uuid=uuid,
                name=(gpu.findtext("product_name") or "").strip(),
                memory_total_mb=_mebibytes(gpu.findtext("fb_memory_usage/total") or ""),
                source="nvidia-smi",
            )
        )
    return gpus


def parse_compute_apps(text: str) -> list[GpuProcess]:
    """`nvidia-smi --query-compute-apps=pid,process_name,gpu_uuid,used_gpu_memory --format=csv`.

    The header line is skipped; with nothing running the output is the header alone."""
    processes = []
    for line in text.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if not line.strip() or fields[0].lower() == "pid" or line.startswith("No running"):
            continue
        if len(fields) < 4 or not fields[0].isdigit():
            logger.warning("nvidia-smi --query-compute-apps: skipped unreadable line %r", line)
            continue
        # Process names may hold commas; pid leads and uuid and memory close the line.
        name = ", ".join(fields[1:-2])
        processes.append(GpuProcess(int(fields[0]), name, fields[-2], _mebibytes(fields[-1])))
    return processes


def _mebibytes(value: str) -> int | None:
    """ "81559", "81559 MiB" -> 81559; "[N/A]", "N/A" and anything else unreadable -> None."""
    number = value.strip().removesuffix("MiB").strip()
    return int(number) if number.isdigit() else None
