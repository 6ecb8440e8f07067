"""One session's view of its container: the manager, the container's name, the task.

Tools and graders get a :class:`Workspace`; the session record keeps only the name (any worker
can rebuild this from it). :meth:`Workspace.ensure` makes the container on first use, with the
task's repository in its working folder.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from envbuilder.isolation.sandbox._containers import SessionContainers
from envbuilder.isolation.sandbox._repos import repository_tree


@dataclass(frozen=True)
class Workspace:
    """A session's container (made on first use)."""

    containers: SessionContainers
    name: str | None
    """The container's name from the session record (None: the session never made one)."""
    task: Mapping[str, Any]
    deadline: float | None = None
    """When the episode's time limit ends (seconds since the epoch; None: no limit): a call
    running then is cut short."""

    def wall_seconds(self, seconds: float) -> float:
        """A call's wall time ``seconds``, cut to what is left before :attr:`deadline`."""
        if self.deadline is None:
            return seconds
        return max(min(seconds, self.deadline - time.time()), 0.01)

    @property
    def spec(self) -> Any:
        return self.containers.spec

    async def base_tree(self) -> bytes | None:
        """The task's repository tree at its base commit (a tar), or None without `repository:`."""
        repo = self.containers.spec.repository
        if repo is None:
            return None
        return await asyncio.to_thread(repository_tree, repo, self.task, self.containers.base_dir)

    async def ensure(self) -> str:
        """The container's name, once it runs and is set up.

        Raises:
            SandboxError: the engine, the image, the repository or the set-up failed.
        """
        assert self.name is not None, "a workspace used by a tool has a name"
        if not self.containers.is_ready(self.name):  # (the tree only when it may be needed)
            await self.containers.ensure(self.name, await self.base_tree(), self.task)
        return self.name
