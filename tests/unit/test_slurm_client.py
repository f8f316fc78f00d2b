"""The SLURM client without a cluster: the sbatch command it builds (values checked, an
argument list, never a shell), and its reading of squeue/sacct output. The samples below were
printed by the real test cluster (scripts/slurm_up.sh, SLURM 22.05.8); the same calls run
against that cluster in tests/integration/test_slurm_cluster.py."""

from __future__ import annotations

import subprocess

import pytest

from agentsys.slurm import client as slurm
from agentsys.slurm.client import JobState, SlurmError

# `squeue -h -j 1,2,3,4 -o '%i|%T|%r'`: three 1-GPU jobs on 2 GPUs and a CPU job on 2 CPUs.
SQUEUE_SAMPLE = "3|PENDING|Resources\n4|PENDING|Priority\n1|RUNNING|None\n2|RUNNING|None\n"
# `sacct -c -j 1,2,3,4 -P -n -o jobid,state,exitcode` once they ended (job 4: `exit 3`).
SACCT_SAMPLE = "2|COMPLETED|0:0\n1|COMPLETED|0:0\n4|FAILED|3:0\n3|COMPLETED|0:0\n"


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "job.sh"
    path.write_text("#!/bin/sh\necho hi\n")
    return path


def _argv(script, **options):
    defaults = {"job_name": "run-1", "gpus": 0, "workdir": script.parent, "output": "out.log"}
    return slurm.SlurmJobSpec(script, **{**defaults, **options}).argv()


def _spec(script, gpus=0):
    return slurm.SlurmJobSpec(script, job_name="j", gpus=gpus, workdir=".", output="o")


def test_sbatch_argv_carries_every_option_as_its_own_argument(script, tmp_path):
    argv = _argv(
        script,
        gpus=2,
        output=tmp_path / "run.log",
        partition="gpu.a100",
        account="lab-1",
        time_limit="1-02:03:04",
        qos="normal",
        constraint="a100&nvlink",
    )
    assert argv[:2] == ["sbatch", "--parsable"]
    assert argv[-1] == str(script)
    assert "--gres=gpu:2" in argv
    assert f"--chdir={tmp_path}" in argv
    # One file for both streams.
    assert f"--output={tmp_path / 'run.log'}" in argv
    assert f"--error={tmp_path / 'run.log'}" in argv
    assert "--export=ALL" in argv
    for option in (
        "--partition=gpu.a100",
        "--account=lab-1",
        "--time=1-02:03:04",
        "--qos=normal",
        "--constraint=a100&nvlink",
    ):
        assert option in argv


def test_no_gres_without_gpus_and_no_unset_options(script):
    argv = _argv(script)
    assert not [arg for arg in argv if arg.startswith(("--gres", "--partition", "--time"))]


@pytest.mark.parametrize("time_limit", ["90", "10:00", "01:30:00", "2-00", "2-12:00", "7-00:00:00"])
def test_slurm_time_formats_accepted(script, time_limit):
    assert f"--time={time_limit}" in _argv(script, time_limit=time_limit)


@pytest.mark.parametrize(
    ("option", "value", "words"),
    [
        ("partition", "gpu; rm -rf /", "bad partition"),
        ("partition", "gpu --account=x", "bad partition"),
        ("partition", "", "bad partition"),
        ("account", "$(id)", "bad account"),
        ("qos", "a,b", "bad qos"),
        ("time_limit", "1 hour", "bad time limit"),
        ("time_limit", "10:00;ls", "bad time limit"),
        ("constraint", "a100 b", "bad constraint"),
        ("gpus", -1, "bad gpus"),
        ("gpus", True, "bad gpus"),
        ("gpus", "1", "bad gpus"),
        ("job_name", "two\nlines", "bad job name"),
    ],
)
def test_bad_values_are_refused_before_sbatch_runs(script, monkeypatch, option, value, words):
    monkeypatch.setattr(subprocess, "run", _must_not_run)
    with pytest.raises(SlurmError, match=words):
        slurm.submit(
            slurm.SlurmJobSpec(
                script, **{"job_name": "j", "gpus": 0, "workdir": ".", "output": "o", option: value}
            )
        )


def _must_not_run(*args, **kwargs):
    raise AssertionError("no command may run for a refused value")


def test_a_missing_script_is_named(tmp_path):
    with pytest.raises(SlurmError, match="no job script at"):
        _argv(tmp_path / "gone.sh")


def test_a_script_named_like_an_option_stays_a_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "--wrap=id").write_text("#!/bin/sh\n")
    argv = _argv(tmp_path / "--wrap=id")
    assert argv[-1] == str(tmp_path / "--wrap=id")  # absolute: cannot read as an option


class _Recorder:
    """Stands in for subprocess.run: records each call, answers from a queue."""

    def __init__(self, *answers):
        self.calls, self.answers = [], list(answers)

    def __call__(self, argv, **kwargs):
        self.calls.append((argv, kwargs))
        returncode, stdout, stderr = self.answers.pop(0)
        return subprocess.CompletedProcess(argv, returncode, stdout, stderr)


def test_submit_runs_an_argument_list_with_a_timeout_and_passes_env_through_the_environment(
    script, monkeypatch
):
    recorder = _Recorder((0, "42\n", ""))
    monkeypatch.setattr(subprocess, "run", recorder)
    spec = slurm.SlurmJobSpec(script, job_name="j", gpus=1, workdir=".", output="o")
    job_id = slurm.submit(spec, extra_env={"RUN_ID": "a,b c"})
    assert job_id == 42
    [(argv, kwargs)] = recorder.calls
    assert isinstance(argv, list)
    assert kwargs.get("shell", False) is False
    assert kwargs["timeout"] > 0
    assert kwargs["env"]["RUN_ID"] == "a,b c"
    assert not [arg for arg in argv if "RUN_ID" in arg]


def test_submit_reads_the_cluster_suffix_of_parsable(script, monkeypatch):
    monkeypatch.setattr(subprocess, "run", _Recorder((0, "77;agentsys-test\n", "")))
    assert slurm.submit(_spec(script, gpus=0)) == 77


def test_a_bad_environment_name_is_refused(script, monkeypatch):
    monkeypatch.setattr(subprocess, "run", _must_not_run)
    with pytest.raises(SlurmError, match="bad environment variable name"):
        slurm.submit(_spec(script), extra_env={"A B": "1"})


def test_an_sbatch_refusal_carries_slurms_own_words(script, monkeypatch):
    # What the real sbatch printed for --gres=gpu:3 on the 2-GPU test node.
    stderr = (
        "sbatch: error: Batch job submission failed: "
        "Requested node configuration is not available\n"
    )
    monkeypatch.setattr(subprocess, "run", _Recorder((1, "", stderr)))
    with pytest.raises(SlurmError) as caught:
        slurm.submit(_spec(script, gpus=3))
    assert str(caught.value) == (
        "sbatch refused the job: Batch job submission failed: "
        "Requested node configuration is not available"
    )


def test_a_missing_binary_says_not_installed(script, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SlurmError, match="SLURM is not installed: no sbatch on PATH"):
        slurm.submit(_spec(script, gpus=0))
    with pytest.raises(SlurmError, match="SLURM is not installed: no squeue on PATH"):
        slurm.job_states([1])
    assert slurm.available() == (False, "SLURM is not installed: no sbatch on PATH")


def test_a_command_that_hangs_is_a_timeout_error(monkeypatch):
    def hang(argv, **kwargs):
        raise subprocess.TimeoutExpired(argv, kwargs["timeout"])

    monkeypatch.setattr(subprocess, "run", hang)
    with pytest.raises(SlurmError, match=r"squeue did not answer within .* slurmctld down"):
        slurm.job_states([1])


def test_a_controller_that_is_down_is_named(monkeypatch):
    # The real squeue's words, 9 s after slurmctld was stopped.
    stderr = "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"
    monkeypatch.setattr(subprocess, "run", _Recorder((1, "", stderr)))
    with pytest.raises(SlurmError, match=r"squeue failed: .*Unable to contact slurm controller"):
        slurm.job_states([1])


def test_squeue_sample_parsed():
    assert slurm.parse_squeue(SQUEUE_SAMPLE) == {
        1: JobState("RUNNING"),
        2: JobState("RUNNING"),
        3: JobState("PENDING", reason="Resources"),
        4: JobState("PENDING", reason="Priority"),
    }


def test_sacct_sample_parsed_and_the_last_line_of_a_reused_id_wins():
    # The jobcomp file keeps an earlier cluster's job 1 (ids restart with a fresh state dir).
    states = slurm.parse_sacct("1|FAILED|2:0\n" + SACCT_SAMPLE + "6|CANCELLED|0:0\n1.batch|X|0:0\n")
    assert states == {
        1: JobState("COMPLETED", exit_code=0),
        2: JobState("COMPLETED", exit_code=0),
        3: JobState("COMPLETED", exit_code=0),
        4: JobState("FAILED", exit_code=3),
        6: JobState("CANCELLED", exit_code=0),
    }
    assert states[4].finished and not JobState("RUNNING").finished


def test_a_signal_reads_as_the_shells_128_plus_n():
    assert slurm.parse_sacct("9|FAILED|0:9\n")[9].exit_code == 137


def test_job_states_asks_sacct_only_for_jobs_squeue_no_longer_lists(monkeypatch):
    recorder = _Recorder((0, "3|PENDING|Resources\n", ""), (0, "1|COMPLETED|0:0\n", ""))
    monkeypatch.setattr(subprocess, "run", recorder)
    states = slurm.job_states([3, 1, 99, 3])
    assert states == {
        3: JobState("PENDING", reason="Resources"),
        1: JobState("COMPLETED", exit_code=0),
    }
    (squeue, _), (sacct, _) = recorder.calls
    assert squeue == ["squeue", "-h", "-j", "1,3,99", "-o", "%i|%T|%r"]
    assert sacct == ["sacct", "-c", "-j", "1,99", "-P", "-n", "-o", "jobid,state,exitcode"]


def test_squeue_knowing_none_of_the_ids_is_not_an_error(monkeypatch):
    # The real squeue exits 1 when no id given is still in the controller.
    stderr = "slurm_load_jobs error: Invalid job id specified\n"
    monkeypatch.setattr(subprocess, "run", _Recorder((1, "", stderr), (0, "5|TIMEOUT|0:15\n", "")))
    assert slurm.job_states([5]) == {5: JobState("TIMEOUT", exit_code=143)}


def test_no_ids_no_calls(monkeypatch):
    monkeypatch.setattr(subprocess, "run", _must_not_run)
    assert slurm.job_states([]) == {}


def test_scancel_refusal_on_stderr_with_exit_0_is_an_error(monkeypatch):
    # The real `scancel -v 99999`: exit status 0, the refusal only on stderr.
    stderr = (
        "scancel: Terminating job 99999\n"
        "scancel: error: Kill job error on job id 99999: Invalid job id specified\n"
    )
    monkeypatch.setattr(subprocess, "run", _Recorder((0, "", stderr)))
    with pytest.raises(
        SlurmError, match=r"scancel refused job 99999: Kill job error .* Invalid job id"
    ):
        slurm.cancel(99999)


def test_cancelling_a_job_that_already_ended_is_a_no_op(monkeypatch):
    stderr = (
        "scancel: Terminating job 1\n"
        "scancel: error: Kill job error on job id 1: Job/step already completing or completed\n"
    )
    monkeypatch.setattr(subprocess, "run", _Recorder((0, "", stderr)))
    slurm.cancel(1)


def test_scontrol_refusal_carries_its_message(monkeypatch):
    monkeypatch.setattr(
        subprocess,
        "run",
        _Recorder((1, "", "Job/step already completing or completed for job 1\n")),
    )
    with pytest.raises(SlurmError, match="scontrol resume refused job 1: Job/step already"):
        slurm.resume(1)


def test_a_controller_that_does_not_answer_is_not_a_refusal_of_the_job(script, monkeypatch):
    # What the real sbatch printed with slurmctld stopped on the test cluster.
    stderr = (
        "sbatch: error: Batch job submission failed: "
        "Unable to contact slurm controller (connect failure)\n"
    )
    monkeypatch.setattr(subprocess, "run", _Recorder((1, "", stderr)))
    with pytest.raises(SlurmError) as caught:
        slurm.submit(_spec(script))
    assert str(caught.value) == (
        "sbatch could not reach slurmctld: Batch job submission failed: "
        "Unable to contact slurm controller (connect failure)"
    )
    assert not str(caught.value).startswith(slurm.REFUSED)
