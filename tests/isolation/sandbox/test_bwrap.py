"""The bubblewrap backend run for real: what it shows of the host, and its own failures (what
every backend does is tested once for all of them: test_backends.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from envbuilder.errors import SandboxError
from envbuilder.isolation.sandbox import BubblewrapBackend, Limits, Status, backend_from_name

FAST = Limits(wall_seconds=5, cpu_seconds=1, memory_mb=256, processes=8, output_kb=8, disk_mb=1)


async def _py(code: str, limits: Limits = FAST) -> tuple[Status, str, str]:
    result = await BubblewrapBackend().run(["python3", "-I", "main.py"], {"main.py": code.encode()}, limits)
    return result.status, result.stdout, result.describe()


async def test_the_view_is_small() -> None:
    status, out, _ = await _py("import os; print(sorted(os.listdir('/')))")
    assert status is Status.OK
    assert set(eval(out)) <= {
        "bin",
        "dev",
        "etc",
        "lib",
        "lib32",
        "lib64",
        "libx32",
        "proc",
        "sbin",
        "tmp",
        "usr",
        "work",
    }


async def test_an_engine_failure_is_a_sandbox_error_not_a_result(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A workdir bwrap cannot mount: as root the run is nobody, who cannot enter a 0700 folder.
    hidden = tmp_path / "hidden"
    hidden.mkdir(mode=0o700)
    workdir = hidden if os.geteuid() == 0 else tmp_path / "missing"
    with pytest.raises(SandboxError, match="bubblewrap failed"):
        await BubblewrapBackend().run(["true"], {}, FAST, workdir=workdir)
    with pytest.raises(SandboxError, match="'no-such-interpreter' is not in the sandbox"):
        await BubblewrapBackend().run(["no-such-interpreter"], {}, FAST)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxError, match="needs `bwrap`, which is not installed"):
        await BubblewrapBackend().run(["/usr/bin/true"], {}, FAST)


def test_unknown_backend_names_the_known_ones() -> None:
    with pytest.raises(
        SandboxError, match=r"unknown sandbox backend 'bubblewarp'\. Did you mean 'bubblewrap'"
    ):
        backend_from_name("bubblewarp")


async def test_etc_holds_the_sandboxs_own_users_not_the_hosts() -> None:
    status, out, _ = await _py(
        "import os, pwd; print(sorted(os.listdir('/etc'))); print(open('/etc/passwd').read().strip());"
        "print(pwd.getpwuid(os.getuid()).pw_name)"
    )
    assert status is Status.OK
    listing, *passwd, me = out.splitlines()
    own = {"group", "hosts", "nsswitch.conf", "passwd"}
    linker = {"alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime"}  # if the host has
    assert own <= set(eval(listing)) <= own | linker
    users = [line.split(":")[0] for line in passwd]
    assert users[0] == "root" and set(users) <= {"root", "sandbox", "nobody"} and len(users) <= 3
    assert me in ("sandbox", "nobody")
