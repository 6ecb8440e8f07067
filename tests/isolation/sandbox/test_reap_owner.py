"""Which leftover containers a starting server reaps: not those of a process of the same server
id that still runs beside it (a second server, a parallel test run), only those of one gone."""

from __future__ import annotations

import socket
import subprocess
import sys

from envbuilder.isolation.sandbox._containers import _alive_here
from envbuilder.isolation.sandbox._docker import owner


def test_a_running_process_on_this_host_keeps_its_containers():
    assert _alive_here(owner())  # this process
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as other:
        try:
            assert _alive_here(f"{socket.gethostname()}:{other.pid}:abcd1234")
        finally:
            other.kill()


def test_a_process_that_is_gone_or_elsewhere_does_not():
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    pid = int(done.stdout)
    assert not _alive_here(f"{socket.gethostname()}:{pid}:abcd1234")
    assert not _alive_here(f"another-host.invalid:{1}:abcd1234")  # pid 1 runs here, not there
    assert not _alive_here("")
    assert not _alive_here("garbage")
