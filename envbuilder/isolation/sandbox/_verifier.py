"""A task's own test script run after the episode, in a fresh container (Harbor's verifier).

:func:`run_verifier` is how a test script that writes its verdict to a file in the container
(Harbor's ``/logs/verifier/reward.txt``) is run without letting the agent write that verdict:

1. the session's container was stopped by the caller (:meth:`SessionContainers.snapshot`): every
   process the agent started is gone, and only its working folder is taken;
2. a *new* container of the task's image is made, with no network; its working folder is
   emptied and filled with the agent's files (the image's own when the agent never made a
   container), owned by the agent's uid: nothing else the agent did carries over;
3. the tests enter only now, at ``/tests`` (root's, read-only to others), and the verdict
   folder is made fresh and empty, root's, mode 0755;
4. the script runs with the verifier's uid and environment (``PYTHONSAFEPATH=1``: a ``python3 -m
   pytest`` in the working folder cannot import the agent's ``pytest.py``), under a deadline;
5. the container is stopped (what the script started ends with it), and only then the verdict
   folder is copied out through the engine's archive API: no process in the container takes
   part in reading it. Only regular files are read (a symlink is not followed), each bounded.

What stays possible is inherent in the format: a test that runs the agent's program as the
verdict folder's owner (root) runs the agent's code with the right to write the verdict. Tests
run the agent's programs as another user (``subprocess.run(..., user=65534)``) to close that.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import shlex
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from envbuilder.errors import SandboxError
from envbuilder.isolation.sandbox._containers import SessionContainers, _put, new_name
from envbuilder.isolation.sandbox._docker import LABEL
from envbuilder.isolation.sandbox._result import RunResult

__all__ = ["VerifierRun", "run_verifier"]

_MAX_VERDICT = 64 * 1024


@dataclass
class VerifierRun:
    """What a verifier run left: the script's result and the verdict folder's regular files."""

    result: RunResult
    files: dict[str, bytes] = field(default_factory=dict)
    """Regular files of the verdict folder (top level), by name, each at most 64 KiB."""
    oversized: list[str] = field(default_factory=list)
    """Files of the verdict folder larger than 64 KiB (not read)."""


async def run_verifier(
    containers: SessionContainers,
    image: str,
    tree: bytes | None,
    tests: bytes,
    command: Sequence[str],
    *,
    user: int = 0,
    timeout: float = 600,
    env: Mapping[str, str] | None = None,
    tests_dir: str = "/tests",
    verdict_dir: str = "/logs/verifier",
    output_bytes: int = 1024 * 1024,
    task: Mapping[str, Any] | None = None,
) -> VerifierRun:
    """Run ``command`` in a fresh container of ``image`` holding ``tree`` (a tar of the agent's
    working folder; None: the image's own) and the ``tests`` tar at ``tests_dir``; then stop it
    and read the regular files of ``verdict_dir`` (see the module docstring). The container has
    ``task``'s own limits (:meth:`SessionContainers.limits`); ``timeout`` is lowered to the
    operator's maximum for a test run.

    Raises:
        SandboxError: the engine failed (a failing script is a result, not an error).
    """
    spec = containers.spec
    work_path = spec.workdir.rstrip("/")
    for fixed in (tests_dir.rstrip("/"), verdict_dir.rstrip("/")):
        if not work_path or fixed == work_path or fixed.startswith(work_path + "/"):
            raise SandboxError(
                f"the working folder {spec.workdir} holds {fixed}, which the tests' run makes afresh",
                hint="Give the sandbox a workdir such as /app",
            )
    name = new_name()
    work = shlex.quote(spec.workdir)
    uid = spec.user
    tdir, vdir = shlex.quote(tests_dir), shlex.quote(verdict_dir)
    timeout = min(timeout, containers.maxima.verifier_timeout_sec)
    async with containers.engine.connect() as api:
        await containers.can_limit_storage(api)
        config = containers.config(image, name, network=False, task=task)
        config["Labels"][LABEL] = "grading"
        await api.create(config, name=name)
        try:
            await api.start(name)
            clear = f"find {work} -mindepth 1 -delete && " if tree is not None else ""
            await containers._root(
                api,
                name,
                f"mkdir -p {work} && {clear}rm -rf {tdir} {vdir} && mkdir -p {tdir} {vdir} "
                f"&& chmod 0755 {tdir} {vdir}",
                "prepare the tests",
            )
            if tree is not None:
                await _put(api, name, spec.workdir, tree)
            await containers._root(api, name, f"chown -R {uid}:{uid} {work}", "hand the files to the tests")
            await _put(api, name, tests_dir, tests)
            await containers._root(
                api, name, f"chown -R 0:0 {tdir} && chmod -R go-w {tdir}", "protect the tests"
            )
            result = await containers.exec(
                name,
                command,
                user=user,
                workdir=spec.workdir,
                timeout=timeout,
                output_bytes=output_bytes,
                env={"PYTHONSAFEPATH": "1", "PYTHONDONTWRITEBYTECODE": "1", **(env or {})},
                api=api,
            )
            await api.kill(name)  # what the tests started ends before the verdict is read
            response = await api.request(
                "GET", f"/containers/{name}/archive", params={"path": verdict_dir.rstrip("/") + "/."},
                missing_ok=True, timeout=120,
            )  # fmt: skip
            run = VerifierRun(result)
            if response is not None:
                _read_verdict(response.content, run)
            return run
        finally:
            with contextlib.suppress(SandboxError):
                await asyncio.shield(api.remove(name))


def _read_verdict(data: bytes, run: VerifierRun) -> None:
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            for member in tar:
                parts = [p for p in member.name.split("/") if p not in ("", ".")]
                if len(parts) != 1 or not member.isfile():
                    continue  # a link or a folder is never followed
                if member.size > _MAX_VERDICT:
                    run.oversized.append(parts[0])
                    continue
                handle = tar.extractfile(member)
                if handle is not None:
                    run.files[parts[0]] = handle.read(_MAX_VERDICT)
    except tarfile.TarError as exc:
        raise SandboxError(f"the verdict folder could not be read: {exc}") from None
