import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from agentsys.gpus import (
    QUERY_GPU_ARGS,
    GpuInfo,
    GpuProcess,
    busy_gpu_uuids,
    detect_gpus,
    gpu_processes,
    parse_compute_apps,
    parse_list_gpus,
    parse_query_gpu_csv,
    parse_smi_xml,
    read_nvml_gpus,
)

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "gpu-h100"

H100_UUID = "GPU-4ecc990f-d7a8-ad06-a401-87f0ae8f218e"
H100_NAME = "NVIDIA H100 80GB HBM3"
# What the fixture host's card reports: 81559MiB in nvidia-smi.txt and nvidia-smi-q.xml.
H100 = GpuInfo(0, H100_UUID, H100_NAME, 81559, "nvidia-smi")
# `--query-gpu=index,uuid,name,memory.total --format=csv,noheader,nounits` on that host
# (built from nvidia-smi.txt and nvidia-smi-q.xml), plus a second card to check ordering.
QUERY_GPU_CSV = (
    f"0, {H100_UUID}, {H100_NAME}, 81559\n"
    "1, GPU-00000000-1111-2222-3333-444444444444, NVIDIA H100 80GB HBM3, 81559\n"
)


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text()


class FakeNvml:
    """pynvml's calls, answering with the values in nvml.txt (memory in bytes)."""

    def __init__(self, total_bytes: int = 85520809984, fail_init: bool = False):
        self.total_bytes = total_bytes
        self.fail_init = fail_init
        self.shut_down = False

    def nvmlInit(self):
        if self.fail_init:
            raise OSError("NVML Shared Library Not Found")

    def nvmlShutdown(self):
        self.shut_down = True

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetUUID(self, handle):
        return H100_UUID

    def nvmlDeviceGetName(self, handle):
        return H100_NAME.encode()  # old pynvml releases return bytes

    def nvmlDeviceGetMemoryInfo(self, handle):
        return SimpleNamespace(total=self.total_bytes)


def test_nvml_dump_matches_the_other_fixtures():
    # nvml.txt is an ad-hoc dump, not a tool's format: we only check it agrees with nvidia-smi.
    # Its lines: "driver V", "INDEX NAME UUID TOTAL_BYTES USED_BYTES", "  proc PID USED_BYTES".
    lines = fixture_text("nvml.txt").splitlines()
    gpu_line, proc_line = lines[1].split(), lines[2].split()
    assert gpu_line[0] == "0" and gpu_line[-3] == H100_UUID
    assert int(gpu_line[-2]) // (1024 * 1024) == 81559
    assert proc_line[:2] == ["proc", "416"] and int(proc_line[2]) // (1024 * 1024) == 4334


def test_read_nvml_gpus_converts_bytes_to_mib_and_shuts_down():
    nvml = FakeNvml()
    assert read_nvml_gpus(nvml) == [GpuInfo(0, H100_UUID, H100_NAME, 81559, "nvml")]
    assert nvml.shut_down


def test_detect_prefers_declared_gpus():
    def no_runner(args, timeout):
        raise AssertionError("declared GPUs need no detection")

    gpus = detect_gpus([2, 3], runner=no_runner)
    assert [(gpu.index, gpu.source, gpu.name) for gpu in gpus] == [
        (2, "declared", "declared GPU"),
        (3, "declared", "declared GPU"),
    ]
    assert detect_gpus([], runner=no_runner) == []


def test_detect_uses_nvml_when_it_works():
    def no_runner(args, timeout):
        raise AssertionError("nvidia-smi is only the fallback")

    gpus = detect_gpus(runner=no_runner, read_nvml=lambda: read_nvml_gpus(FakeNvml()))
    assert [gpu.source for gpu in gpus] == ["nvml"]


def test_detect_falls_back_to_nvidia_smi_when_nvml_fails():
    calls = []

    def runner(args, timeout):
        calls.append((tuple(args), timeout))
        return QUERY_GPU_CSV

    gpus = detect_gpus(runner=runner, read_nvml=lambda: read_nvml_gpus(FakeNvml(fail_init=True)))
    assert calls == [(QUERY_GPU_ARGS, 10.0)]
    assert gpus[0] == H100
    assert [gpu.index for gpu in gpus] == [0, 1]


@pytest.mark.parametrize(
    "error",
    [
        FileNotFoundError("nvidia-smi"),
        subprocess.TimeoutExpired("nvidia-smi", 10),
        subprocess.CalledProcessError(9, "nvidia-smi"),
        PermissionError("nvidia-smi"),
    ],
)
def test_detect_returns_nothing_without_gpus(error):
    def runner(args, timeout):
        raise error

    def no_nvml():
        raise ImportError("no pynvml")

    assert detect_gpus(runner=runner, read_nvml=no_nvml) == []


def test_detect_on_this_machine_never_raises():
    # Real NVML and nvidia-smi: whatever this machine has, the answer is a list.
    gpus = detect_gpus()
    assert all(gpu.source in ("nvml", "nvidia-smi") for gpu in gpus)


def test_parse_list_gpus_fixture():
    assert parse_list_gpus(fixture_text("list-gpus.txt")) == [
        GpuInfo(0, H100_UUID, H100_NAME, None, "nvidia-smi")
    ]


def test_parse_list_gpus_skips_mig_lines_and_garbage():
    text = (
        f"GPU 0: {H100_NAME} (UUID: {H100_UUID})\n"
        "  MIG 1g.10gb     Device  0: (UUID: MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee)\n"
        "Failed to initialize NVML: Driver/library version mismatch\n"
        "GPU x: broken\n"
    )
    assert [gpu.uuid for gpu in parse_list_gpus(text)] == [H100_UUID]


def test_parse_query_gpu_csv():
    assert parse_query_gpu_csv(QUERY_GPU_CSV)[0] == H100


def test_parse_query_gpu_csv_skips_bad_lines_and_reads_na_memory():
    text = f"garbage\n\n0, {H100_UUID}, {H100_NAME}, [N/A]\nx, y\n"
    assert parse_query_gpu_csv(text) == [GpuInfo(0, H100_UUID, H100_NAME, None, "nvidia-smi")]


def test_parse_smi_xml_fixture():
    assert parse_smi_xml(fixture_text("nvidia-smi-q.xml")) == [H100]


def test_parse_smi_xml_tolerates_bad_xml_and_missing_fields():
    assert parse_smi_xml("<nvidia_smi_log><gpu>") == []
    assert parse_smi_xml("") == []
    text = (
        "<nvidia_smi_log><gpu><uuid>GPU-a</uuid><minor_number>N/A</minor_number></gpu>"
        "<gpu><product_name>no uuid</product_name></gpu>"
        "<gpu><uuid>GPU-b</uuid></gpu></nvidia_smi_log>"
    )
    gpus = parse_smi_xml(text)
    assert [(gpu.index, gpu.uuid, gpu.memory_total_mb) for gpu in gpus] == [
        (0, "GPU-a", None),
        (2, "GPU-b", None),
    ]


def test_parse_compute_apps_busy_fixture():
    assert parse_compute_apps(fixture_text("compute-apps-busy.csv")) == [
        GpuProcess(416, "python3", H100_UUID, 4334)
    ]


def test_parse_compute_apps_idle_fixture_is_header_only():
    assert parse_compute_apps(fixture_text("compute-apps-idle.csv")) == []


def test_parse_compute_apps_odd_lines():
    text = (
        "pid, process_name, gpu_uuid, used_gpu_memory [MiB]\n"
        "No running processes found\n"
        "12, /opt/a, b/train.py, GPU-x, [N/A]\n"
        "not-a-pid, python3, GPU-x, 10 MiB\n"
        "13, short\n"
    )
    assert parse_compute_apps(text) == [GpuProcess(12, "/opt/a, b/train.py", "GPU-x", None)]


def test_gpu_processes_runs_nvidia_smi_and_survives_its_absence():
    def runner(args, timeout):
        return fixture_text("compute-apps-busy.csv")

    def missing(args, timeout):
        raise FileNotFoundError("nvidia-smi")

    assert [process.pid for process in gpu_processes(runner)] == [416]
    assert gpu_processes(missing) == []


def test_busy_gpu_uuids():
    processes = [
        GpuProcess(416, "python3", "GPU-foreign", 4334),
        GpuProcess(500, "python3", "GPU-ours", 4000),
        GpuProcess(600, "Xorg", "GPU-display", 20),
        GpuProcess(700, "python3", "GPU-unknown", None),
    ]
    assert busy_gpu_uuids(processes, own_pids={500}) == {"GPU-foreign", "GPU-unknown"}
    assert busy_gpu_uuids(processes, own_pids={416, 500}, min_used_mb=10) == {
        "GPU-display",
        "GPU-unknown",
    }


def test_busy_gpu_uuids_on_the_fixture_host():
    processes = parse_compute_apps(fixture_text("compute-apps-busy.csv"))
    assert busy_gpu_uuids(processes, own_pids=set()) == {H100_UUID}
    assert busy_gpu_uuids(processes, own_pids={416}) == set()
