"""Run untrusted code isolated and limited: backends (bubblewrap, Docker/Podman), limits, results."""

from envbuilder.isolation.sandbox._backend import Backend
from envbuilder.isolation.sandbox._bwrap import BubblewrapBackend
from envbuilder.isolation.sandbox._containers import SessionContainers, new_name, server_id
from envbuilder.isolation.sandbox._docker import DockerBackend
from envbuilder.isolation.sandbox._images import ImageBuild, ImageRecipe, build_image, default_image
from envbuilder.isolation.sandbox._limits import EffectiveLimits, Maxima, check_limits, task_limits
from envbuilder.isolation.sandbox._pool import ContainerPool
from envbuilder.isolation.sandbox._repos import repository_tree, strip_git
from envbuilder.isolation.sandbox._result import Limits, RunResult, Status
from envbuilder.isolation.sandbox._run import run_code
from envbuilder.isolation.sandbox._select import BACKEND_ENV, backend_from_name, default_backend
from envbuilder.isolation.sandbox._session_image import BASE_PACKAGES, alias_image, base_image
from envbuilder.isolation.sandbox._slots import Slots, default_concurrency, shared_slots
from envbuilder.isolation.sandbox._workspace import Workspace
from envbuilder.spec import ContainerSpec, ImageBuildSpec, RepositorySpec

__all__ = [
    "BACKEND_ENV",
    "BASE_PACKAGES",
    "Backend",
    "BubblewrapBackend",
    "ContainerPool",
    "ContainerSpec",
    "DockerBackend",
    "EffectiveLimits",
    "ImageBuild",
    "ImageBuildSpec",
    "ImageRecipe",
    "Limits",
    "Maxima",
    "RepositorySpec",
    "RunResult",
    "SessionContainers",
    "Slots",
    "Status",
    "Workspace",
    "alias_image",
    "backend_from_name",
    "base_image",
    "build_image",
    "check_limits",
    "default_backend",
    "default_concurrency",
    "default_image",
    "new_name",
    "repository_tree",
    "run_code",
    "server_id",
    "shared_slots",
    "strip_git",
    "task_limits",
]
