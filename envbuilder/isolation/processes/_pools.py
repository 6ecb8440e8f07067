"""The process-wide pools, and whether checkers that evaluate answers can be confined here.

- :func:`grading_pool` (``$ENVBUILDER_GRADING_PROCESSES``, default the cores this process may
  use, at least 2): math and slow regular-expression checks. Answers are data there (parsed and
  compared, never run), so its zygotes run unconfined, with the per-process limits.
- :func:`confined_pool`: checkers that run the answer (reasoning-gym's ``countdown``: SymPy's
  ``parse_expr`` is ``eval``). Zygotes run under bubblewrap (``sandbox.confined_python``), each
  child drops to ``$ENVBUILDER_SANDBOX_UID`` when the zygote is root, and the function arms the
  guard (``_guard``) before the checker sees the answer. Where bubblewrap is missing or cannot
  make namespaces, this pool refuses (:class:`~envbuilder.errors.SandboxError`: the answer is
  ungradeable) unless the operator allowed unconfined checkers (:func:`allow_unconfined`,
  ``serve --allow-unconfined-checkers`` or ``$ENVBUILDER_ALLOW_UNCONFINED_CHECKERS=1``); then
  its zygotes run without bubblewrap but keep everything else, loudly logged.
- The render pool lives in ``envbuilder.templating._isolated``.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from envbuilder.errors import EnvbuilderError, SandboxError
from envbuilder.isolation.processes._frames import WorkerFailed
from envbuilder.isolation.processes._pool import START_TIMEOUT, ProcessPool, Step
from envbuilder.isolation.processes._registry import worker_function
from envbuilder.isolation.sandbox._slots import count_setting

__all__ = [
    "ALLOW_UNCONFINED_ENV",
    "PROCESSES_ENV",
    "Confinement",
    "allow_unconfined",
    "confined_pool",
    "confinement",
    "default_size",
    "grading_pool",
    "require_confinement",
    "run_checked",
    "run_confined",
    "sandbox_uid",
    "serving_confinement",
    "why_unconfined",
]

T = TypeVar("T")

PROCESSES_ENV = "ENVBUILDER_GRADING_PROCESSES"
ALLOW_UNCONFINED_ENV = "ENVBUILDER_ALLOW_UNCONFINED_CHECKERS"
log = logging.getLogger("envbuilder.isolation.processes")
_HOW = (
    "Install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap) "
    "where user namespaces are allowed (in a container: a non-root user, with --security-opt "
    "seccomp=unconfined and systempaths=unconfined; see deploy/README.md), or accept the risk with "
    "`envbuilder serve --allow-unconfined-checkers`"
)


def default_size() -> int:
    """``$ENVBUILDER_GRADING_PROCESSES``, else the cores this process may use (at least 2)."""
    return count_setting(PROCESSES_ENV, at_least=2)


def sandbox_uid() -> int:
    """The uid a confined child drops to when its zygote runs as root (``$ENVBUILDER_SANDBOX_UID``,
    default 65534, "nobody": the code sandbox's too)."""
    from envbuilder.isolation.sandbox._bwrap import _NOBODY, UID_ENV

    return int(os.environ.get(UID_ENV, _NOBODY))


_pools: dict[str, ProcessPool] = {}
_lock = threading.Lock()


def grading_pool() -> ProcessPool:
    """The process-wide pool of the graders' CPU-bound work on answers as data."""
    with _lock:
        pool = _pools.get("grading")
        if pool is None:
            pool = _pools["grading"] = ProcessPool(default_size())
            atexit.register(pool.close)
        return pool


async def run_checked(fn: Callable[..., T], *args: Any, timeout: float, prepare: Sequence[Step] = ()) -> T:
    """``fn(*args)`` in the grading pool under a hard deadline (see :meth:`ProcessPool.run`)."""
    return await grading_pool().run(fn, *args, timeout=timeout, prepare=prepare)


# -- confinement ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Confinement:
    """Whether checkers that evaluate answers run confined here, and if not, why."""

    confined: bool
    why: str | None = None
    """Why not (bubblewrap's own words), when not."""
    allowed: bool = False
    """The operator allowed them to run unconfined."""

    @property
    def word(self) -> str:
        """``bubblewrap`` or ``off`` (for ``/health``)."""
        return "bubblewrap" if self.confined else "off"

    def describe(self) -> str:
        """One line for the start-up output."""
        if self.confined:
            return (
                "checkers that evaluate answers run confined: bubblewrap (no network, own namespaces, "
                "read-only system), a fresh process per answer that can start no other"
            )
        return (
            f"checkers that evaluate answers run UNCONFINED ({self.why}): "
            "what answers make them run runs on this host"
        )


_state: dict[str, Any] = {"probe": None, "allowed": False}


def allow_unconfined(allowed: bool = True) -> None:
    """Let checkers that evaluate answers run without bubblewrap in this process (and in worker
    processes it starts) where it cannot run; off by default."""
    _state["allowed"] = allowed


def _allowed() -> bool:
    return bool(_state["allowed"]) or os.environ.get(ALLOW_UNCONFINED_ENV, "") in ("1", "true", "yes")


def confinement() -> Confinement:
    """Whether checkers that evaluate answers run confined (probed once per process, about a
    second: it starts a confined worker and checks its limits)."""
    with _lock:
        why = _state["probe"]
        if why is None:
            why = _state["probe"] = [why_unconfined()]
    reason = why[0]
    return Confinement(reason is None, reason, _allowed())


def require_confinement() -> Confinement:
    """:func:`confinement`, when it is on or the operator allowed it off.

    Raises:
        SandboxError: checkers that evaluate answers cannot be confined here and running them
            unconfined was not allowed; the message says why and how.
    """
    state = confinement()
    if not state.confined and not state.allowed:
        raise SandboxError(
            f"this spec's grader evaluates answers as code, which runs only confined, and "
            f"confinement does not work here: {state.why}",
            hint=_HOW,
            code="unconfined",
        )
    return state


def serving_confinement(evaluating: bool, allow_unconfined_checkers: bool) -> Confinement | None:
    """For a server about to serve: None when no served checker evaluates answers, else
    :func:`require_confinement` with the operator's allowance applied.

    Raises:
        SandboxError: as :func:`require_confinement`.
    """
    if not evaluating:
        return None
    if allow_unconfined_checkers:
        allow_unconfined()
    return require_confinement()


def confined_pool() -> ProcessPool:
    """The pool for checkers that evaluate the answer as code (see the module docstring).
    Blocks for the first probe (about a second).

    Raises:
        SandboxError: confinement does not work here and was not allowed off.
    """
    state = require_confinement()
    with _lock:
        pool = _pools.get("confined")
        if pool is None:
            if not state.confined:
                log.warning("envbuilder: %s", state.describe())
            pool = _pools["confined"] = ProcessPool(
                default_size(), confined=state.confined, drop_uid=sandbox_uid(), clean_env=True, alone=True
            )
            atexit.register(pool.close)
        return pool


async def run_confined(fn: Callable[..., T], *args: Any, timeout: float, prepare: Sequence[Step] = ()) -> T:
    """``fn(*args)`` in the :func:`confined_pool` under a hard deadline.

    Raises:
        SandboxError: confinement does not work here and was not allowed off.
    """
    pool = _pools.get("confined")
    if pool is None:
        pool = await asyncio.to_thread(confined_pool)
    return await pool.run(fn, *args, timeout=timeout, prepare=prepare)


def why_unconfined() -> str | None:
    """Why a confined worker cannot run here (None when it can): bubblewrap must start one, and
    the kernel must refuse that worker's children a process of their own."""
    from envbuilder.isolation.sandbox._bwrap import confined_python

    try:
        argv = confined_python([sys.executable, "-P", "-c", ""])  # bubblewrap's own words, if it fails
        done = subprocess.run(argv, capture_output=True, timeout=START_TIMEOUT, check=False)
    except EnvbuilderError as exc:
        return str(exc)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap could not start ({type(exc).__name__})"
    if done.returncode != 0:
        last = done.stderr.decode(errors="replace").strip().splitlines()[-1:]
        return f"bubblewrap exited with status {done.returncode}" + (f": {last[0][:200]}" if last else "")
    pool = ProcessPool(1, confined=True, drop_uid=sandbox_uid(), memory_limit=512 << 20, alone=True)
    try:
        forked = pool.call(_probe, timeout=START_TIMEOUT)
    except (WorkerFailed, TimeoutError) as exc:
        return f"a confined worker failed: {exc}"
    finally:
        pool.close()
    if forked:
        return "a confined worker's child could start a process (the process limit has no effect here)"
    return None


@worker_function
def _probe() -> bool:
    """Run in a confined child: whether it can start a process (it must not)."""
    try:
        pid = os.fork()
    except OSError:
        return False
    if pid == 0:  # pragma: no cover - the probe's own child
        os._exit(0)
    os.waitpid(pid, 0)
    return True
