"""runagentd reaps zombies it adopted, never a child's exit status that its starter awaits."""

import os
import subprocess
import time

from agentsys import orphans


def _zombie() -> subprocess.Popen:
    child = subprocess.Popen(["/bin/sh", "-c", "exit 7"])
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        with open(f"/proc/{child.pid}/stat", "rb") as stat:
            if stat.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                return child
        time.sleep(0.01)
    raise AssertionError("the child never ended")


def test_an_awaited_child_keeps_its_exit_status_for_its_starter():
    child = _zombie()
    orphans.awaited(child.pid)
    try:
        assert orphans.reap() == 0
        assert child.wait(5) == 7  # its starter still reads the real code
    finally:
        orphans.no_longer_awaited(child.pid)


def test_a_zombie_nobody_awaits_is_reaped_and_kept_ones_are_not():
    kept, orphan = _zombie(), _zombie()
    assert orphans.reap(keep={kept.pid}) == 1
    assert not os.path.exists(f"/proc/{orphan.pid}")
    assert kept.wait(5) == 7
