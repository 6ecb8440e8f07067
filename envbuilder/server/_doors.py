"""The doors a server opens besides ORS, by name (``serve --door NAME``; ``ServerSettings.doors``).

Each door is a router over the same state (environments, session store, limits, API keys) as
the ORS routes, and a check of the served environments that refuses at start-up what the
door's protocol cannot express (saying which feature, of which environment).

========  ==========================  ===========================================================
door      where                       what
========  ==========================  ===========================================================
openenv   ``/openenv``                OpenEnv's WebSocket and HTTP reset / step / state, its MCP
nemo-gym  the root, ``/nemo_gym``     a NeMo Gym resources server (one environment per server)
========  ==========================  ===========================================================
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envbuilder.environment import Environment
from envbuilder.errors import EnvbuilderError, did_you_mean

if TYPE_CHECKING:  # (FastAPI is imported with the routes: `check_doors` runs before it)
    from fastapi import APIRouter


@dataclass(frozen=True)
class Door:
    name: str
    prefix: str
    """Where a client points at it."""
    router: Callable[[list[Environment]], APIRouter]
    """Its routes (imported on first use: a server without the door does not pay for it)."""
    refuses: Callable[[list[Environment]], list[str]]
    """What it cannot express of the served environments, each naming the feature (empty: none)."""


def _openenv(envs: list[Environment]) -> APIRouter:
    from envbuilder.server._openenv_routes import router

    return router


def _openenv_refuses(envs: list[Environment]) -> list[str]:
    from envbuilder.server._openenv import refuses

    return refuses(envs)


def _nemo_gym(envs: list[Environment]) -> APIRouter:
    from envbuilder.server._nemo_gym_routes import build_router

    return build_router(envs[0])


def _nemo_gym_refuses(envs: list[Environment]) -> list[str]:
    from envbuilder.server._nemo_gym import refuses

    return refuses(envs, _ors_roots())


def _ors_roots() -> frozenset[str]:
    """The first path segments the ORS routes and the other doors take at the root."""
    from envbuilder.server._routes import ROUTES

    paths = [route.path for route in ROUTES]
    roots = {p.strip("/").split("/")[0] for p in paths if p.strip("/") and not p.startswith("/{")}
    return frozenset(roots | {"openenv", "nemo_gym", "docs", "redoc", "openapi.json"})


DOORS: dict[str, Door] = {
    "openenv": Door("openenv", "/openenv", _openenv, _openenv_refuses),
    "nemo-gym": Door("nemo-gym", "", _nemo_gym, _nemo_gym_refuses),
}
"""The doors by name."""


def open_doors(names: Iterable[str], envs: list[Environment]) -> list[APIRouter]:
    """The routers of the doors ``names`` (checked by :func:`check_doors`)."""
    return [door.router(envs) for door in check_doors(names, envs)]


def check_doors(names: Iterable[str], envs: list[Environment]) -> list[Door]:
    """The doors ``names``, each able to serve ``envs``.

    Raises:
        EnvbuilderError: an unknown door (code ``unknown_door``), or what a door cannot express
            (code ``door_refuses``: every problem, each naming the environment and the feature).
    """
    doors = []
    for name in dict.fromkeys(names):
        door = DOORS.get(name)
        if door is None:
            hint = did_you_mean(name, DOORS) or f"The doors are: {', '.join(DOORS)}"
            raise EnvbuilderError(f"unknown door {name!r}", hint=hint, code="unknown_door")
        problems = door.refuses(envs)
        if problems:
            raise EnvbuilderError(
                f"the {name} door cannot serve what it was given: " + "; ".join(problems),
                hint=f"Serve those environments without --door {name}",
                code="door_refuses",
            )
        doors.append(door)
    return doors
