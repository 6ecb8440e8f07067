"""A spec's `sandbox:` block: a container that lives for the session (the models only; the
containers themselves are :mod:`envbuilder.isolation.sandbox`'s)."""

from __future__ import annotations

from pydantic import Field, model_validator

from envbuilder.plugins import ConfigModel

__all__ = ["ContainerSpec", "ImageBuildSpec", "RepositorySpec"]


class RepositorySpec(ConfigModel):
    """Where a task's repository comes from; it is put in the container's working folder at its
    base commit, as a fresh git repository with one commit (no later history, no remotes)."""

    field: str | None = None
    """The task field naming the repository: a git repository or bundle, as a path relative to
    `mirrors` (or the spec's folder), e.g. `repo` holding `tomli` or `hukkin/tomli`."""
    commit_field: str = "base_commit"
    """The task field holding the commit the task starts from."""
    mirrors: str | None = None
    """A folder of repositories (relative to the spec's folder, or absolute under
    `$ENVBUILDER_REPOSITORIES`): `<mirrors>/<repo>`, `<repo>.git` or `<repo>.bundle`, with `/`
    in a name also tried as `__`."""
    tarball_field: str | None = None
    """A task field holding the repository's tree as a tar (gzip allowed; bytes or base64 text),
    instead of `field` and `commit_field`."""

    @model_validator(mode="after")
    def _one_source(self) -> RepositorySpec:
        if (self.field is None) == (self.tarball_field is None):
            raise ValueError("give exactly one of `field` (a repository) or `tarball_field`")
        return self


class ImageBuildSpec(ConfigModel):
    """A Dockerfile to build the session image from (its `FROM` a base image the engine has):
    one for the spec (`dockerfile`), or one per task (`context_field`)."""

    dockerfile: str | None = None
    """The Dockerfile, relative to the spec's folder."""
    context: str = "."
    """The build context folder, relative to the spec's folder."""
    context_field: str | None = None
    """Or: a task field naming the task's own build context (a folder holding its `Dockerfile`,
    relative to the spec's folder), e.g. `environment` of a `harbor` dataset; each task's image
    is built once per content, a `FROM` image the engine lacks read as the local base."""

    @model_validator(mode="after")
    def _one_dockerfile(self) -> ImageBuildSpec:
        if (self.dockerfile is None) == (self.context_field is None):
            raise ValueError("give exactly one of `dockerfile` (one image) or `context_field` (one per task)")
        return self


class ContainerSpec(ConfigModel):
    """A container that lives for the session: the `bash`, `python` and file tools run in it,
    and repository graders run the tests in a fresh one of the same image."""

    image: str | None = None
    """An image the engine has (there is no registry to pull from), e.g. `envbuilder-base:bookworm`."""
    build: ImageBuildSpec | None = None
    """Or: build the image from a Dockerfile (tagged by a hash of its context, built once per engine)."""
    workdir: str = Field(default="/testbed", pattern=r"^/[A-Za-z0-9._/-]*$")
    """The working folder (the repository goes there); the agent's shell starts in it."""
    user: int = Field(default=65534, ge=0)
    """The uid the agent's calls and the tests run as (owner of the working folder)."""
    network: bool = False
    """Give the container a network (off: no interface but loopback)."""
    memory_mb: int = Field(default=1024, ge=64, le=65_536)
    """Memory of the whole container, in MiB."""
    cpus: float = Field(default=1.0, gt=0, le=64)
    """CPUs the container may use."""
    processes: int = Field(default=256, ge=8, le=65_536)
    """Processes and threads the container may hold at once."""
    storage_mb: int | None = Field(default=None, ge=64, le=16_777_216)
    """Disk the container may write, in MiB (default: no bound; enforced where the engine's
    storage driver can: overlay2 on xfs with project quotas, btrfs, zfs, devicemapper)."""
    time_limit: float | None = Field(default=None, gt=0, le=604_800)
    """Seconds an episode may run from its first call (Harbor's `[agent] timeout_sec`): a call
    after it ends the episode, graded as it stands; a call running at it is cut short."""
    limits_field: str | None = None
    """A task field holding the task's own limits, JSON of `{cpus, memory_mb, storage_mb,
    agent_timeout_sec}` (the `harbor` dataset's `limits`): each value given replaces the one
    above for that task, up to the operator's maxima (`$ENVBUILDER_MAX_CPUS`, ...)."""
    setup: str | None = None
    """A bash command run as root once the repository is in place (`pip install -e .`)."""
    repository: RepositorySpec | None = None
    """The task's repository, at its base commit, in `workdir`."""

    @model_validator(mode="after")
    def _one_image(self) -> ContainerSpec:
        if (self.image is None) == (self.build is None):
            raise ValueError("give exactly one of `image` or `build`")
        return self
