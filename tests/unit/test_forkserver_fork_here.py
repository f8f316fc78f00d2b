"""runagentd forks its workers' forkserver from itself (agentsys.forkserver.fork_here): the
preload (Django, in runagentd) is imported once, in the daemon, and never again; the
forkserver and its workers hold none of the daemon's descriptors (a lease file held open
would keep the embedded database's lease alive after the daemon is gone); and the daemon's
stop ends it."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

DAEMON = textwrap.dedent(
    """
    import contextlib, json, os, sys
    from agentsys import forkserver

    def open_files(pid):
        found = []
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):  # listdir's own descriptor, gone by now
                found.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        return found

    def worker(lease, out):
        import tests.unit.counted_import  # imported already: nothing runs again
        with open(out, "w") as f:
            json.dump({"pid": os.getpid(), "lease_held": lease in open_files("self")}, f)

    if __name__ == "__main__":
        lease_path, out = sys.argv[1], sys.argv[2]
        lease = open(lease_path, "w")  # a descriptor of the daemon's, as its lease file
        server = forkserver.fork_here(("tests.unit.counted_import",))
        context, pid = forkserver.start(("tests.unit.counted_import",))
        process = context.Process(target=worker, args=(lease_path, out))
        process.start()
        process.join(30)
        fds = open_files(pid)
        forkserver.stop()
        gone = not os.path.exists(f"/proc/{pid}")
        print(json.dumps({"server": server, "pid": pid, "exit": process.exitcode,
                          "server_holds_lease": lease_path in fds, "gone": gone}))
    """
)

THREADED = textwrap.dedent(
    """
    import threading, time
    from agentsys import forkserver
    threading.Thread(target=time.sleep, args=(5,), daemon=True).start()
    print(forkserver.fork_here(()))
    """
)


def _run(code: str, *args: str, **env: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_the_forkserver_is_forked_from_the_daemon_and_imports_nothing_again(tmp_path):
    log, out, lease = tmp_path / "imports", tmp_path / "worker.json", tmp_path / "lease"
    daemon = json.loads(_run(DAEMON, str(lease), str(out), COUNTED_IMPORT_LOG=str(log)))
    worker = json.loads(out.read_text())

    assert daemon["server"] == daemon["pid"]  # start() found the forked one running
    assert daemon["exit"] == 0
    # Imported once, in the daemon: not in the forkserver, not in the worker.
    assert len(log.read_text().split()) == 1
    assert worker["pid"] != daemon["pid"]
    assert not daemon["server_holds_lease"] and not worker["lease_held"]
    assert daemon["gone"]


def test_with_a_thread_running_it_forks_nothing():
    assert _run(THREADED) == "None"
