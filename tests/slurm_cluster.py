"""The real single-node SLURM of the tests (scripts/slurm_up.sh: slurmctld, slurmd, munge, 2
GPUs as device nodes without a driver).

Skipped (with the reason) only where the cluster cannot be made: not root, or no apt-get.
Anywhere else a cluster that does not come up is a failure."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from agentsys.slurm import client as slurm
from tests.helpers import REPO


def bring_up_slurm() -> None:
    if os.geteuid() != 0:
        pytest.skip("SLURM tests need root (scripts/slurm_up.sh installs and starts SLURM)")
    if shutil.which("apt-get") is None:
        pytest.skip("SLURM tests need apt-get (Debian's SLURM packages)")
    proc = subprocess.run(
        [str(REPO / "scripts" / "slurm_up.sh")], capture_output=True, text=True, timeout=300
    )
    if proc.returncode != 0:
        pytest.fail(f"scripts/slurm_up.sh failed: {proc.stderr.strip() or proc.stdout.strip()}")
    ok, reason = slurm.available()
    assert ok, reason
