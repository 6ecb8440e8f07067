"""Run code in the sandbox: wait for a fair slot, then hand the run to the backend."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path

from envbuilder.isolation.sandbox._backend import Backend
from envbuilder.isolation.sandbox._result import Limits, RunResult
from envbuilder.isolation.sandbox._select import default_backend
from envbuilder.isolation.sandbox._slots import Slots, shared_slots


async def run_code(
    command: Sequence[str],
    files: Mapping[str, bytes],
    limits: Limits,
    *,
    backend: Backend | None = None,
    key: Hashable = None,
    workdir: Path | None = None,
    slots: Slots | None = None,
) -> RunResult:
    """Run ``command`` over ``files`` in the sandbox once a slot is free.

    Args:
        command: The argv, run in ``/work`` (e.g. ``["python3", "-I", "main.py"]``).
        files: Files to put in ``/work`` first, by plain name.
        limits: What the run may use.
        backend: The isolation engine (default: :func:`default_backend`).
        key: Who the run is for (a session): keys take turns when runs queue.
        workdir: A host folder to mount as ``/work`` instead of a fresh one.
        slots: The concurrency bound (default: the process-wide one).

    Raises:
        SandboxError: the engine could not run anything (the code's own failures are results).
    """
    backend = backend or default_backend()
    async with (slots or shared_slots()).slot(key):
        return await backend.run(command, files, limits, workdir=workdir)
