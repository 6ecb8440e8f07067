"""The bubblewrap backend run for real: what a run sees, each limit, and engine failures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from envbuilder.errors import SandboxError
from envbuilder.sandbox import BubblewrapBackend, Limits, Status, backend_from_name

FAST = Limits(wall_seconds=5, cpu_seconds=1, memory_mb=256, processes=8, output_kb=8, disk_mb=1)


async def _py(code: str, limits: Limits = FAST) -> tuple[Status, str, str]:
    result = await BubblewrapBackend().run(["python3", "-I", "main.py"], {"main.py": code.encode()}, limits)
    return result.status, result.stdout, result.describe()


async def test_the_view_is_small_and_the_environment_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVBUILDER_SECRET_FOR_TEST", "sk-hidden")
    status, out, _ = await _py(
        "import os; print(sorted(os.listdir('/'))); print(sorted(os.environ)); print(os.listdir('.'));"
        "print(os.getpid(), len([p for p in os.listdir('/proc') if p.isdigit()]))"
    )
    assert status is Status.OK
    root, env, here, pids = out.splitlines()
    assert set(eval(root)) <= {
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
    assert eval(env) == ["HOME", "LANG", "PATH", "PWD", "PYTHONDONTWRITEBYTECODE", "TMPDIR"]
    assert eval(here) == ["main.py"]
    assert int(pids.split()[1]) <= 3  # its own PID namespace: bwrap's init, sh/prlimit, python


async def test_the_code_yields_the_cpu_to_the_server() -> None:
    from envbuilder.sandbox._process import NICENESS

    status, out, _ = await _py("import os; print(os.nice(0))")
    assert status is Status.OK and int(out) == min(19, os.nice(0) + NICENESS)


async def test_cpu_time_is_its_own_limit() -> None:
    status, _, reason = await _py("while True: pass", FAST.model_copy(update={"wall_seconds": 30}))
    assert status is Status.CPU_TIME and reason.startswith("cpu time limit")


async def test_disk_is_bounded() -> None:
    status, _, reason = await _py("open('/tmp/x', 'wb').write(b'x' * 3_000_000)")
    assert status is Status.EXIT
    assert "File too large" in reason or "No space left" in reason


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


async def test_the_code_cannot_pose_as_an_engine_failure() -> None:
    status, _, reason = await _py("import sys; sys.stderr.write('bwrap: fake failure\\n'); sys.exit(1)")
    assert status is Status.EXIT and "bwrap: fake failure" in reason


def test_unknown_backend_names_the_known_ones() -> None:
    with pytest.raises(
        SandboxError, match=r"unknown sandbox backend 'bubblewarp'\. Did you mean 'bubblewrap'"
    ):
        backend_from_name("bubblewarp")


def test_file_names_are_plain() -> None:
    with pytest.raises(ValueError, match="must be a plain name"):
        import asyncio

        asyncio.run(BubblewrapBackend().run(["true"], {"../x": b""}, FAST))


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
