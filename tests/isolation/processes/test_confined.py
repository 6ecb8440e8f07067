"""Confined workers (bubblewrap), as checkers that evaluate answers use them: a child can start
no process or thread, eats at most its own address space, leaves nothing for the next one, cannot
reach its zygote; the guard refuses an answer's code; without bubblewrap they refuse to run
unless the operator allowed it."""

from __future__ import annotations

import asyncio
import os
import shutil
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuilder.errors import SandboxError
from envbuilder.isolation.processes import CodeRefused, ProcessPool, WorkerError, WorkerFailed, _pools
from tests.conftest import ROOT
from tests.isolation.processes import functions as workers

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None and not os.environ.get("CI"), reason="bubblewrap is not installed"
)
NOBODY = 65534


@pytest.fixture
def confined(monkeypatch: pytest.MonkeyPatch) -> Iterator[ProcessPool]:
    # The zygote imports this folder's worker functions: show it to the sandbox.
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pool = ProcessPool(2, confined=True, drop_uid=NOBODY, clean_env=True, alone=True)
    yield pool
    pool.close()


def run(pool: ProcessPool, fn, *args):  # type: ignore[no-untyped-def]
    return asyncio.run(pool.run(fn, *args, timeout=60))


def test_a_child_can_start_no_process_and_no_thread(confined: ProcessPool) -> None:
    assert run(confined, workers.fork_bomb, 300) == 0
    assert run(confined, workers.threads) is False
    # As root, the child is nobody (the kernel counts processes for any uid but root's).
    assert run(confined, workers.uid) == (NOBODY if os.geteuid() == 0 else os.getuid())


def test_memory_is_bounded_and_the_pool_goes_on(confined: ProcessPool) -> None:
    with pytest.raises(WorkerFailed):
        run(confined, workers.hog)
    assert run(confined, workers.spin, 0.0) == "done"


def test_nothing_is_left_for_the_next_call(confined: ProcessPool) -> None:
    small = ProcessPool(1, confined=True, drop_uid=NOBODY, clean_env=True, alone=True)
    try:
        assert run(small, workers.leave_file, "note") is True
        assert run(small, workers.file_there, "note") is False
        assert run(small, workers.poison, "always 1.0") == "always 1.0"
        assert run(small, workers.poisoned) == "clean"
    finally:
        small.close()


def test_a_child_that_kills_its_zygote_costs_only_its_own_call(confined: ProcessPool) -> None:
    killed = run(confined, workers.kill_zygote)
    # As root the child (nobody) may not signal its zygote; as another user it may, and then
    # the zygote is replaced.
    assert killed == (0 if os.geteuid() == 0 else 1)
    assert [run(confined, workers.spin, 0.0) for _ in range(3)] == ["done"] * 3


def test_the_guard_refuses_an_answers_code(confined: ProcessPool, tmp_path: Path) -> None:
    assert run(confined, workers.evaluate, "(25 + 50) * 3 - 7") == 218.0
    assert run(confined, workers.evaluate, "[[1, 2], [3, 4]][1][0]") == 3.0
    attacks = {
        "__import__('os').getpid()": "code",
        "exec('import os')": "code",
        "(1).__class__.__mro__": "code",
        "getattr(1, 'real')": "code",
        "eval('1')": "code",
        "[x for x in ().__class__.__bases__]": "code",
    }
    for attack, kind in attacks.items():
        with pytest.raises(CodeRefused) as refused:
            run(confined, workers.evaluate, attack)
        assert refused.value.what == kind, attack
        # A checker that swallows the error (and would score 0) still reports the refusal.
        with pytest.raises(CodeRefused):
            run(confined, workers.evaluate_and_catch, attack)


def test_without_the_guard_the_confinement_still_holds(confined: ProcessPool, tmp_path: Path) -> None:
    marker = tmp_path / "written"
    code = f"open({str(marker)!r}, 'w').write('x')"
    with pytest.raises(WorkerError):  # a read-only view of the system: no host file is written
        run(confined, workers.unguarded_eval, code)
    assert not marker.exists()
    reply = b'{"ok": 1.0}'
    frame = struct.pack("!I", len(reply)) + reply
    forged = (
        "__import__('os').write(next(int(f) for f in __import__('os').listdir('/proc/self/fd') "
        "if __import__('os').readlink('/proc/self/fd/' + f).startswith('socket:')), "
        f"{frame!r}) and __import__('os')._exit(0)"
    )
    # It can say what its own call replies (the guard is what stops that), nothing more.
    assert run(confined, workers.unguarded_eval, forged) == 1.0


def test_a_confined_worker_starts_here_or_says_why_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from envbuilder.isolation.processes import why_unconfined

    assert why_unconfined() is None  # bubblewrap is installed where the tests run
    fake = tmp_path / "bwrap"  # a bubblewrap that cannot make namespaces, as in some containers
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert (
        why_unconfined() == "bubblewrap exited with status 1: bwrap: No permissions to create new namespace"
    )
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert "needs `bwrap`, which is not installed" in (why_unconfined() or "")


_NO_SANDBOX = """
import asyncio, os, sys
from envbuilder.isolation import processes
from envbuilder.errors import SandboxError
from tests.isolation.processes import functions as workers
try:
    processes.confined_pool()
except SandboxError as exc:
    print("refused:", exc.message, "|", exc.hint)
processes.allow_unconfined()
pool = processes.confined_pool()
print("confined:", pool.confined, "uid:", asyncio.run(pool.run(workers.uid, timeout=60)))
try:
    asyncio.run(pool.run(workers.evaluate, "__import__('os').getpid()", timeout=60))
except processes.CodeRefused as exc:
    print("guard:", exc.what)
"""


def test_without_bubblewrap_evaluating_checkers_refuse_unless_allowed(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _NO_SANDBOX],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PATH": str(tmp_path)},  # no bwrap on it
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(
        "refused: this spec's grader evaluates answers as code, which runs only confined"
    )
    assert "needs `bwrap`, which is not installed" in lines[0] and "--allow-unconfined-checkers" in lines[0]
    expected_uid = NOBODY if os.geteuid() == 0 else os.getuid()
    assert lines[1] == f"confined: False uid: {expected_uid}"
    assert lines[2] == "guard: code"
    assert "run UNCONFINED" in done.stderr  # said loudly


def test_require_confinement_says_why_and_how(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(_pools._state, "probe", ["bubblewrap exited with status 1: no namespaces"])
    monkeypatch.setitem(_pools._state, "allowed", False)
    monkeypatch.delenv(_pools.ALLOW_UNCONFINED_ENV, raising=False)
    with pytest.raises(SandboxError) as refused:
        _pools.require_confinement()
    assert "no namespaces" in refused.value.message and "apt-get install bubblewrap" in (
        refused.value.hint or ""
    )
    monkeypatch.setenv(_pools.ALLOW_UNCONFINED_ENV, "1")
    state = _pools.require_confinement()
    assert (state.confined, state.allowed, state.word) == (False, True, "off")


def test_an_import_path_of_root_or_tmp_never_shows_the_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    from envbuilder.isolation.sandbox._bwrap import confined_python

    monkeypatch.setattr(sys, "path", [*sys.path, "/", "/tmp", "/tmp/"])
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    argv = confined_python([sys.executable])
    shown = {argv[i + 1] for i, arg in enumerate(argv) if arg == "--ro-bind"}
    assert not shown & {"/", "/tmp", "/tmp/"}
    pool = ProcessPool(1, confined=True, drop_uid=NOBODY, clean_env=True, alone=True)
    try:
        assert run(pool, workers.leave_file, "private") is True  # its own /tmp, not the host's
    finally:
        pool.close()
    assert not Path("/tmp/private").exists()


_FROM_ITS_CHECKOUT = """
import os, sys
root = os.getcwd()
# As in a clone with an editable install run from its own folder (CI, a user's checkout): the
# package is found through the working folder only; no other checkout is on the path.
sys.path[:] = [
    p for p in sys.path
    if not (p and os.path.isfile(os.path.join(p, "pyproject.toml")) and os.path.realpath(p) != root)
]
from envbuilder.isolation.processes import why_unconfined
print(why_unconfined())
"""


def test_a_worker_imports_envbuilder_with_no_pythonpath_from_the_checkouts_own_folder() -> None:
    # The folder holding the package is the working folder, which is never shown whole: the
    # worker must still import this envbuilder (it once bound only a subpackage, and every
    # confined worker of an editable install died at start).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", _FROM_ITS_CHECKOUT],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "None"
