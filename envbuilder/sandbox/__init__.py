"""Run untrusted code isolated and limited: backends (bubblewrap, Docker/Podman), limits, results."""

from envbuilder.sandbox._backend import Backend
from envbuilder.sandbox._bwrap import BubblewrapBackend
from envbuilder.sandbox._docker import DockerBackend
from envbuilder.sandbox._images import ImageBuild, ImageRecipe, build_image, default_image
from envbuilder.sandbox._result import Limits, RunResult, Status
from envbuilder.sandbox._run import run_code
from envbuilder.sandbox._select import BACKEND_ENV, backend_from_name, default_backend
from envbuilder.sandbox._slots import Slots, default_concurrency, shared_slots

__all__ = [
    "BACKEND_ENV",
    "Backend",
    "BubblewrapBackend",
    "DockerBackend",
    "ImageBuild",
    "ImageRecipe",
    "Limits",
    "RunResult",
    "Slots",
    "Status",
    "backend_from_name",
    "build_image",
    "default_backend",
    "default_concurrency",
    "default_image",
    "run_code",
    "shared_slots",
]
