"""Every backend run for real, with the same tests: what a run sees, each limit, what ends a run,
a kept folder, and what the code cannot do (bubblewrap, Docker, Podman: tests/sandboxes.py)."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuilder.errors import SandboxError
from envbuilder.isolation.sandbox import Backend, Limits, Status
from envbuilder.isolation.sandbox._process import NICENESS
from tests.sandboxes import BACKENDS, make_backend

FAST = Limits(wall_seconds=5, cpu_seconds=1, memory_mb=256, processes=8, output_kb=8, disk_mb=1)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Backend:
    return make_backend(request.param)


async def _py(backend: Backend, code: str, limits: Limits = FAST) -> tuple[Status, str, str]:
    result = await backend.run(["python3", "-I", "main.py"], {"main.py": code.encode()}, limits)
    return result.status, result.stdout, result.describe()


async def test_the_environment_is_empty_and_the_folder_holds_the_files(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVBUILDER_SECRET_FOR_TEST", "sk-hidden")
    result = await backend.run(
        ["python3", "-I", "main.py"],
        {
            "main.py": b"import os, sys\nprint(sorted(os.environ)); print(sorted(os.listdir('.')))\n"
            b"print(os.getcwd(), os.getuid(), len([p for p in os.listdir('/proc') if p.isdigit()]))\n"
            b"print(repr(sys.stdin.read()))\n",
            "data.txt": b"x",
        },
        FAST,
    )
    assert result.status is Status.OK, result
    env, here, where, stdin = result.stdout.splitlines()
    assert eval(env) == ["HOME", "LANG", "PATH", "PWD", "PYTHONDONTWRITEBYTECODE", "TMPDIR"]
    assert eval(here) == ["data.txt", "main.py"]
    cwd, uid, pids = where.split()
    assert cwd == "/work" and uid != "0"
    assert int(pids) <= 3  # its own PID namespace: the set-up, a launcher, python
    assert stdin == "''"  # stdin is empty, not the server's or the engine's


async def test_the_code_yields_the_cpu_to_the_server(backend: Backend) -> None:
    status, out, _ = await _py(backend, "import os; print(os.nice(0))")
    assert status is Status.OK and int(out) >= NICENESS


async def test_exit_status_and_signals_pass_through(backend: Backend) -> None:
    result = await backend.run(["sh", "-c", "echo out; echo err >&2; exit 7"], {}, FAST)
    assert (result.status, result.exit_code, result.stdout, result.stderr) == (
        Status.EXIT,
        7,
        "out\n",
        "err\n",
    )
    result = await backend.run(["sh", "-c", "kill -TERM $$"], {}, FAST)
    assert (result.status, result.exit_code) == (Status.EXIT, 128 + 15)
    result = await backend.run(["bash", "-c", "exit 125"], {}, FAST)
    assert (result.status, result.exit_code) == (Status.EXIT, 125)  # not an engine failure


async def test_cpu_time_is_its_own_limit(backend: Backend) -> None:
    status, _, reason = await _py(backend, "while True: pass", FAST.model_copy(update={"wall_seconds": 30}))
    assert status is Status.CPU_TIME and reason.startswith("cpu time limit")


async def test_wall_time_kills_the_run_and_every_process_in_it(backend: Backend) -> None:
    marker = uuid.uuid4().hex
    code = (
        "import subprocess, time\n"
        f"sleeper = ['python3', '-c', 'import time; time.sleep(300)', '{marker}']\n"
        "subprocess.Popen(sleeper, start_new_session=True)\n"
        "subprocess.Popen(['sh', '-c', 'nohup \"$@\" >/dev/null 2>&1 &', 'sh', *sleeper])\n"
        "print('spawned', flush=True)\n"
        "time.sleep(300)\n"
    )
    status, out, reason = await _py(backend, code, FAST.model_copy(update={"wall_seconds": 2}))
    assert status is Status.TIMEOUT and reason.startswith("timeout") and out == "spawned\n"
    assert await _gone(marker)


async def test_processes_left_by_a_finished_run_are_killed(backend: Backend) -> None:
    marker = uuid.uuid4().hex
    code = (
        "import subprocess\n"
        f"subprocess.Popen(['python3', '-c', 'import time; time.sleep(300)', '{marker}'],"
        " start_new_session=True)\n"
    )
    status, _, _ = await _py(backend, code)
    assert status is Status.OK
    assert await _gone(marker)


async def test_memory_is_bounded(backend: Backend) -> None:
    status, _, reason = await _py(backend, "x = bytearray(2 * 1024 ** 3)")
    assert status is Status.MEMORY and reason.startswith("memory limit"), reason


async def test_processes_are_bounded(backend: Backend) -> None:
    code = "import os\nwhile True:\n    if os.fork() == 0:\n        import time; time.sleep(30)\n"
    status, _, reason = await _py(backend, code)
    assert status is Status.PROCESSES and reason.startswith("process limit"), reason


async def test_output_is_bounded(backend: Backend) -> None:
    status, out, reason = await _py(backend, "while True: print('x' * 1000)")
    assert status is Status.OUTPUT_LIMIT and reason.startswith("output limit")
    assert len(out) <= FAST.output_bytes


async def test_disk_is_bounded(backend: Backend) -> None:
    status, _, reason = await _py(backend, "open('/tmp/x', 'wb').write(b'x' * 3_000_000)")
    assert status is Status.EXIT
    assert "File too large" in reason or "No space left" in reason
    status, _, reason = await _py(backend, "open('big', 'wb').write(b'x' * 3_000_000)")
    assert status is Status.EXIT
    assert "File too large" in reason or "No space left" in reason


async def test_there_is_no_network(backend: Backend) -> None:
    code = (
        "import socket\n"
        "print(sorted(n for _, n in socket.if_nameindex()))\n"
        "socket.create_connection(('1.1.1.1', 53), timeout=2)\n"
    )
    status, out, reason = await _py(backend, code)
    assert out.strip() == "['lo']"
    assert status is Status.EXIT and "Network is unreachable" in reason


async def test_the_system_is_read_only(backend: Backend) -> None:
    code = (
        "import os\n"
        "for p in ('/usr/evil', '/etc/evil', '/evil', '/bin/evil'):\n"
        "    try:\n"
        "        open(p, 'w')\n"
        "    except OSError as e:\n"
        "        print(type(e).__name__)\n"
    )
    status, out, _ = await _py(backend, code)
    assert status is Status.OK and len(out.split()) == 4  # each one refused


async def test_the_code_cannot_pose_as_an_engine_failure(backend: Backend) -> None:
    code = (
        "import sys\n"
        "sys.stderr.write('bwrap: fake failure\\nenvbuilder: the sandbox image could not start\\n')\n"
        "sys.exit(1)\n"
    )
    status, _, reason = await _py(backend, code)
    assert status is Status.EXIT and "envbuilder: the sandbox image could not start" in reason


async def test_a_missing_command_is_a_sandbox_error(backend: Backend) -> None:
    with pytest.raises(SandboxError, match="'no-such-interpreter' is not in the"):
        await backend.run(["no-such-interpreter"], {}, FAST)


async def test_file_names_are_plain(backend: Backend) -> None:
    with pytest.raises(ValueError, match="must be a plain name"):
        await backend.run(["true"], {"../x": b""}, FAST)


@pytest.fixture
def workdir() -> Iterator[Path]:
    # Not under pytest's tmp_path: as root bubblewrap runs as nobody, who must reach the folder.
    root = Path(tempfile.mkdtemp(prefix="envbuilder-test-keep-"))
    root.chmod(0o711)
    folder = root / "session"
    folder.mkdir()
    shutil.chown(folder, 65534, 65534)
    yield folder
    shutil.rmtree(root, ignore_errors=True)


async def test_a_kept_folder_comes_back_with_what_fit(backend: Backend, workdir: Path) -> None:
    limits = FAST.model_copy(update={"disk_mb": 1})
    run = ["sh", "-c", 'mkdir -p sub && echo "$1" > sub/note && cat sub/note && cat old 2>/dev/null; :', "sh"]
    result = await backend.run([*run, "first"], {}, limits, workdir=workdir)
    assert result.ok and result.stdout == "first\n"
    assert (workdir / "sub" / "note").read_text() == "first\n"
    (workdir / "old").write_text("from the host\n")
    result = await backend.run([*run, "second"], {}, limits, workdir=workdir)
    assert result.stdout == "second\nfrom the host\n"
    # Past the quota: the run fails while it runs, and the folder keeps what fit.
    big = "for i in range(40):\n    open(f'part{i}', 'wb').write(b'x' * 65536)\n"
    status, _, reason = await _py_in(backend, big, limits, workdir)
    assert status is Status.EXIT and ("No space left" in reason or "File too large" in reason)
    assert (workdir / "sub" / "note").read_text() == "second\n"
    assert sum(f.stat().st_size for f in workdir.rglob("*") if f.is_file()) <= 1024 * 1024
    assert sorted(p.name for p in workdir.glob("part*"))  # what fit is kept
    for part in workdir.glob("part*"):
        part.unlink()
    # A run killed for its wall time leaves the folder as it was.
    status, _, _ = await _py_in(
        backend,
        "open('late', 'w').write('x')\nwhile True: pass",
        limits.model_copy(update={"wall_seconds": 1, "cpu_seconds": 10}),
        workdir,
    )
    assert status is Status.TIMEOUT and not (workdir / "late").exists(), _


async def _py_in(backend: Backend, code: str, limits: Limits, workdir: Path) -> tuple[Status, str, str]:
    result = await backend.run(
        ["python3", "-I", "main.py"], {"main.py": code.encode()}, limits, workdir=workdir
    )
    return result.status, result.stdout, result.describe()


async def test_a_cancelled_run_is_killed(backend: Backend) -> None:
    marker = uuid.uuid4().hex
    code = f"import time\nprint('started', flush=True)\ntime.sleep(300)  # {marker}\n"
    task = asyncio.ensure_future(
        backend.run(
            ["python3", "-I", "main.py", marker],
            {"main.py": code.encode()},
            FAST.model_copy(update={"wall_seconds": 60}),
        )
    )
    while not _processes_with(marker):  # the run has started
        await asyncio.sleep(0.05)
        assert not task.done(), task.result()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _gone(marker)


async def _gone(marker: str) -> bool:
    """Whether every process with ``marker`` is gone (within a few seconds: the kernel tears a
    PID namespace down after its first process dies)."""
    for _ in range(100):
        if not _processes_with(marker):
            return True
        await asyncio.sleep(0.05)
    return False


def _processes_with(marker: str) -> list[int]:
    """The host's processes whose command line holds ``marker`` (a container's are the host's)."""
    found = []
    for pid in Path("/proc").iterdir():
        if not pid.name.isdigit():
            continue
        try:
            if marker.encode() in (pid / "cmdline").read_bytes():
                found.append(int(pid.name))
        except OSError:
            continue
    return found


async def test_the_last_of_the_output_is_never_lost(backend: Backend) -> None:
    """Output written on both streams just before the code ends comes back whole, every time (a
    container's stdout and stderr travel apart: one may end before the other is all read)."""
    script = (
        "echo out; i=0; while [ $i -lt 300 ]; do echo err$i >&2; i=$((i + 1)); done; "
        "echo last >&2; printf tail; exit 3"
    )
    for _ in range(10):
        result = await backend.run(["sh", "-c", script], {}, FAST)
        assert (result.status, result.exit_code, result.stdout) == (Status.EXIT, 3, "out\ntail")
        assert result.stderr.splitlines() == [f"err{i}" for i in range(300)] + ["last"]
