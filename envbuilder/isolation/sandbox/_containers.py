"""Per-session containers: one container per session, found by its name, on a Docker or Podman engine.

A spec's ``sandbox:`` (:class:`ContainerSpec`) gives the image (a tag the engine has, or a
Dockerfile built on a local base), the resources, the network (off by default), the task's
repository and a set-up command. :class:`SessionContainers` is what a server holds for it:

* **Found by name, not held.** A session keeps only its container's name (``envb-<random>``,
  in the session record), so any worker or replica serves any session: :meth:`ensure` looks the
  name up on the engine and creates the container when it is missing (lazily, on the first call
  that needs it), or starts it again when it was stopped (the files stay, the processes do not).
* **Labelled per server.** Every container carries ``envbuilder.isolation.sandbox=session``, the server's
  id (``$ENVBUILDER_SERVER_ID``, default the host name) and the process that made it. A server
  that starts reaps the containers its id left (a crash, a SIGKILL), except those of a process
  that still runs on this host (a second server beside it); on shutdown it removes those it
  made; a session's end (delete, expiry) removes its own.
* **Calls are execs.** A command runs as an exec in the container as the agent's uid (65534 by
  default), its output read from the exec's stream until the wrapper's end line (background
  processes it started go on running: the session's state), killed with its process group at
  the call's wall time.
* **Warm containers, and places.** With a :class:`~._pool.ContainerPool` (a server's
  ``--max-containers`` and ``--warm-containers``), :meth:`admit` takes a place for a new
  session, fairly between clients, and names its container: a warm one made for the task's
  image and tree (:mod:`._warm`: set up ahead, repository and ready mark in, so the session
  takes it as is), else a blank warm one (created and started; the set-up is left), else a new
  name made on first use. Whoever first *claims* a container (an atomic ``mkdir`` in it, as
  root) sets it up; the others wait for its ready mark, so a replica that did not make it can
  serve it.
* **Grading never trusts the container.** :meth:`snapshot` stops the container first (every
  process the agent started is gone), then copies the working folder out;
  :meth:`run_fresh` runs a command in a *new* container of the same image with a tree the
  caller built (the repository graders put the hidden tests there), with no network.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import logging
import os
import secrets
import shlex
import socket
import tarfile
import time
from collections import deque
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envbuilder.errors import SandboxError
from envbuilder.isolation.sandbox._docker import LABEL, OWNER_LABEL, owner
from envbuilder.isolation.sandbox._engine import STDERR, STDOUT, Engine, EngineAddress, EngineClient
from envbuilder.isolation.sandbox._limits import EffectiveLimits, Maxima, task_limits
from envbuilder.isolation.sandbox._pool import ContainerPool
from envbuilder.isolation.sandbox._process import Output
from envbuilder.isolation.sandbox._repos import committed_tree, repository_tree
from envbuilder.isolation.sandbox._result import RunResult, Status
from envbuilder.isolation.sandbox._warm import BLANK, WarmKey, WarmPlan, tree_key
from envbuilder.spec import ContainerSpec

log = logging.getLogger("envbuilder.isolation.sandbox")

SERVER_ENV = "ENVBUILDER_SERVER_ID"
SERVER_LABEL = "envbuilder.server"
SESSION_LABEL = "envbuilder.session"
NAME_PREFIX = "envb-"
_MB = 1024 * 1024
_ARG_CHUNK = 96 * 1024  # under the kernel's 128 KiB for one argument
_MAX_WRITE = 1024 * 1024
_STATE = "/tmp/.envbuilder"  # the shell's working folder between calls (the agent's own)
_READY = "/.envbuilder-ready"  # root's: written when the set-up is done (the agent cannot)
_CLAIM = "/.envbuilder-setup"  # root's: made (atomically) by whoever sets the container up
_WARM_RETRY = 5.0  # seconds before a warm container that failed to start is tried again


def server_id() -> str:
    """This server's label value (``$ENVBUILDER_SERVER_ID``, default the host name): a restarted
    server reaps what a server of the same id left."""
    return os.environ.get(SERVER_ENV) or socket.gethostname()


def _alive_here(made_by: str) -> bool:
    """Whether the owner label ``made_by`` (``host:pid:random``) names a process that still runs
    on this host: another server of the same id beside this one (a second worker, a test run),
    whose containers are its own. A process on another host cannot be seen: the id decides."""
    host, _, rest = made_by.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def new_name() -> str:
    """A fresh container name for a session."""
    return NAME_PREFIX + secrets.token_hex(10)


@dataclass
class Costs:
    """What containers have cost this process (``/health``)."""

    created: int = 0
    removed: int = 0
    reaped: int = 0
    start_seconds: float = 0.0
    """Sum of create-to-ready times of containers made cold (set-up included)."""
    calls: int = 0
    warmed: int = 0
    """Warm containers made ahead of need."""
    warm_seconds: float = 0.0
    """Sum of their create-and-start times (paid off the sessions' path)."""
    from_warm: int = 0
    """Sessions whose container was a warm one."""
    from_warm_seconds: float = 0.0
    """Sum of those sessions' claim-to-ready times (the set-up left after a warm start)."""

    def as_dict(self, live: int) -> dict[str, Any]:
        return {
            "live": live,
            "created": self.created,
            "removed": self.removed,
            "reaped": self.reaped,
            "calls": self.calls,
            "mean_start_ms": _mean_ms(self.start_seconds, self.created),
            "warmed": self.warmed,
            "mean_warm_start_ms": _mean_ms(self.warm_seconds, self.warmed),
            "from_warm": self.from_warm,
            "mean_ready_from_warm_ms": _mean_ms(self.from_warm_seconds, self.from_warm),
        }


def _mean_ms(seconds: float, count: int) -> float | None:
    return round(seconds / count * 1000, 1) if count else None


class SessionContainers:
    """The containers of one spec's sessions on one engine."""

    def __init__(
        self,
        spec: ContainerSpec,
        base_dir: Path,
        *,
        image: str | None = None,
        host: str | None = None,
        environment: str = "env",
    ):
        self.spec = spec
        self.base_dir = base_dir
        self.address = EngineAddress.from_env(host)
        self.engine = Engine(self.address)
        self.environment = environment
        self.server = server_id()
        self.costs = Costs()
        self.maxima = Maxima.from_env()
        """The operator's bounds on a task's own limits (see :mod:`._limits`)."""
        self._storage: bool | None = None  # whether the engine can bound a container's disk
        self._storage_kind = ""  # the engine's storage driver and filesystem, until a warning said it
        self._lowered: set[str] = set()  # tasks whose limits were lowered (logged once each)
        self._image = image or spec.image
        self._task_images: dict[str, str] = {}  # a task's build context → its image's tag
        self._locks: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Lock]] = {}
        self._ready: set[str] = set()  # names this process saw ready (a cache; the engine decides)
        self._reaped = False
        self.pool: ContainerPool | None = None
        """The server's pool (places and warm containers), when a server set one."""
        self.extra_labels: dict[str, str] = {}
        """Labels a server adds to its containers (a shared store's id, for its reaper)."""
        self.reap_by_server = True
        """Whether a start reaps what an earlier process of this server's id left. Off with a
        shared store: a session there outlives its server, and the store's reaper removes a
        container only once its session is gone."""
        self._warm: dict[WarmKey, deque[str]] = {}  # warm containers of this process by key, oldest first
        self._making: dict[WarmKey, int] = {}  # warm containers being made, by key
        self.plan = WarmPlan()
        """Which keys to keep warm (the clients' recent asks)."""
        self._claimed: set[str] = set()  # blank warm ones handed to sessions, not yet set up
        self._handed: dict[str, WarmKey] = {}  # ready warm ones handed to sessions, not yet used
        self._filler: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._closed = False

    # -- the image ---------------------------------------------------------------------------

    async def image(self, task: Mapping[str, Any] | None = None) -> str:
        """The session image's tag (built from the spec's Dockerfile the first time), or the
        task's own (``build: context_field:``, built once per content).

        Raises:
            SandboxError: the build failed, or the task names no build context.
        """
        build = self.spec.build
        if build is not None and build.context_field is not None:
            folder = (task or {}).get(build.context_field)
            if not isinstance(folder, str) or not folder:
                raise SandboxError(f"the task has no build context in its `{build.context_field}` field")
            context = str(self.base_dir / folder)
            if context not in self._task_images:
                async with self._lock("image:" + context):
                    if context not in self._task_images:
                        from envbuilder.isolation.sandbox._session_image import build_task_image

                        self._task_images[context] = await build_task_image(self.engine, Path(context))
            return self._task_images[context]
        if self._image is not None:
            return self._image
        async with self._lock("image"):
            if self._image is None:
                from envbuilder.isolation.sandbox._session_image import build_session_image

                assert self.spec.build is not None
                self._image = await build_session_image(self.engine, self.spec.build, self.base_dir)
        return self._image

    # -- life of a session's container -------------------------------------------------------

    def labels(self, name: str) -> dict[str, str]:
        return {
            LABEL: "session",
            SERVER_LABEL: self.server,
            OWNER_LABEL: owner(),
            SESSION_LABEL: name,
            "envbuilder.environment": self.environment,
            **self.extra_labels,
        }

    def limits(self, task: Mapping[str, Any] | None = None) -> EffectiveLimits:
        """The limits of ``task``'s containers: its own (``limits_field``), else the spec's,
        within the operator's maxima.

        Raises:
            SandboxError: the task's limits field holds something that is not limits.
        """
        limits = task_limits(self.spec, task, self.maxima)
        if limits.lowered:
            key = str((task or {}).get("id", ""))
            if key not in self._lowered:
                self._lowered.add(key)
                log.warning(
                    "task %r asks for more than the operator allows: %s lowered to the maxima",
                    key, ", ".join(limits.lowered),
                )  # fmt: skip
        return limits

    async def can_limit_storage(self, api: EngineClient) -> bool:
        """Whether the engine's storage driver bounds a container's disk (``StorageOpt``):
        overlay2 on xfs (with project quotas), btrfs, zfs, devicemapper; asked once."""
        if self._storage is None:
            response = await api.request("GET", "/info")
            info = dict(response.json()) if response is not None else {}
            driver = str(info.get("Driver") or "")
            status = {str(k): str(v) for k, v in (info.get("DriverStatus") or []) if k}
            backing = status.get("Backing Filesystem", "")
            self._storage = driver in ("btrfs", "zfs", "devicemapper") or (
                driver in ("overlay2", "overlay") and backing == "xfs"
            )
            self._storage_kind = f"{driver or '?'} on {backing or '?'}"
        return self._storage

    def config(
        self, image: str, name: str, *, network: bool, task: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """The engine's create body for a container of ``task`` (its own limits; see
        :meth:`limits`)."""
        spec = self.spec
        limits = self.limits(task)
        memory = limits.memory_mb * _MB
        host: dict[str, Any] = {}
        if limits.storage_mb is not None and self._storage:
            host["StorageOpt"] = {"size": f"{limits.storage_mb}m"}
        elif limits.storage_mb is not None and self._storage is False and self._storage_kind:
            log.warning(
                "the container engine's storage (%s) cannot bound a container's disk: "
                "storage_mb is not enforced", self._storage_kind,
            )  # fmt: skip
            self._storage_kind = ""  # (said once)
        return {
            "Image": image,
            "Entrypoint": ["sleep"],
            "Cmd": ["infinity"],
            "User": "0:0",
            "WorkingDir": "/",
            "Hostname": "sandbox",
            "Labels": self.labels(name),
            "Env": ["LANG=C.UTF-8", "PATH=/usr/local/bin:/usr/bin:/bin"],
            "NetworkDisabled": not network,
            "HostConfig": {
                "Init": True,  # reaps what the agent's processes leave
                "NetworkMode": "bridge" if network else "none",
                "CapDrop": ["ALL"],
                "CapAdd": ["CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL"],
                "SecurityOpt": ["no-new-privileges"],
                "Memory": memory,
                "MemorySwap": memory,
                "NanoCpus": int(limits.cpus * 1e9),
                "PidsLimit": spec.processes,
                "ShmSize": min(64, limits.memory_mb // 2) * _MB,
                "LogConfig": {"Type": "none", "Config": {}},
                **host,
            },
        }

    def is_ready(self, name: str) -> bool:
        """Whether this process saw the container ``name`` ready (no engine call)."""
        return name in self._ready

    async def ensure(self, name: str, tree: bytes | None, task: Mapping[str, Any] | None = None) -> None:
        """Make sure the session's container runs and is set up (``tree``: a tar of the working
        folder's first contents, e.g. the task's repository; None: the image's own; ``task``:
        the task, whose image it is when each task has its own).

        Raises:
            SandboxError: the engine cannot make it, or the set-up failed.
        """
        made_for = self._handed.pop(name, None)
        if made_for is not None and made_for.limits != self._limits_key(task):
            async with self.engine.connect() as api:  # a ready one made for other limits
                await self._fit(api, name, task)
        if name in self._ready:
            return
        async with self._lock(name):
            if name in self._ready:
                return
            await self.reap_once()
            started = time.monotonic()
            warm = name in self._claimed
            async with self.engine.connect() as api:
                state = await _inspect(api, name)
                made = state is None
                if state is None:
                    try:
                        image = await self.image(task)
                        await self.can_limit_storage(api)
                        config = self.config(image, name, network=self.spec.network, task=task)
                        await api.create(config, name=name)
                    except SandboxError as exc:
                        if "Conflict" not in str(exc) and "already in use" not in str(exc):
                            raise
                        made = False  # another worker made it just now: the claim decides
                    state = await _inspect(api, name) or {}
                if not state.get("Running"):
                    await api.start(name)
                if warm and self.spec.limits_field is not None:
                    await self._fit(api, name, task)  # a warm one was made with the spec's limits
                if not made and not warm and await self._is_ready(api, name):
                    self._ready.add(name)
                    return
                if not await self._claim(api, name):
                    try:
                        await _wait_ready(self, api, name)  # another worker sets it up
                    except SandboxError:
                        # Its set-up was cut short (that worker died): the next call makes it anew.
                        with contextlib.suppress(SandboxError):
                            await asyncio.shield(api.remove(name))
                        raise
                    self._ready.add(name)
                    return
                try:
                    await self._set_up(api, name, tree)
                except BaseException:
                    with contextlib.suppress(SandboxError):
                        await asyncio.shield(api.remove(name))
                    raise
                finally:
                    self._claimed.discard(name)
                took = time.monotonic() - started
                if warm:
                    self.costs.from_warm += 1
                    self.costs.from_warm_seconds += took
                else:
                    self.costs.created += 1
                    self.costs.start_seconds += took
                self._ready.add(name)

    async def _fit(self, api: EngineClient, name: str, task: Mapping[str, Any] | None) -> None:
        """Give a running container ``task``'s own CPU and memory limits (the engine's update)."""
        host = self.config("", name, network=False, task=task)["HostConfig"]
        body = {k: host[k] for k in ("Memory", "MemorySwap", "NanoCpus")}
        await api.request("POST", f"/containers/{name}/update", body=body)

    async def _claim(self, api: EngineClient, name: str) -> bool:
        """Claim the container's set-up (an atomic ``mkdir`` as root) and prepare its folders;
        False when another worker claimed it first."""
        uid, work = self.spec.user, shlex.quote(self.spec.workdir)
        script = (
            f"mkdir {_CLAIM} 2>/dev/null || exit 3; "
            f"mkdir -p {work} {_STATE} && chown {uid}:{uid} {work} {_STATE} && chmod 0700 {_STATE}"
        )
        result = await self.exec(name, ["sh", "-c", script], user=0, timeout=120, api=api)
        if result.ok:
            return True
        if result.exit_code == 3 and result.status is None:
            return False
        raise SandboxError(f"could not prepare the session container: {result.stderr.strip()[-300:]}")

    def _lock(self, key: str) -> asyncio.Lock:
        """One lock per key and event loop (``check`` runs its cases in several loops)."""
        loop = asyncio.get_running_loop()
        held = self._locks.get(key)
        if held is None or held[0] is not loop:
            held = self._locks[key] = (loop, asyncio.Lock())
        return held[1]

    async def _set_up(self, api: EngineClient, name: str, tree: bytes | None) -> None:
        """The set-up of a claimed container (:meth:`_claim` prepared its folders): the task's
        repository committed on the host and uploaded with the ready mark last, in one archive
        (the mark exists only once everything before it is in); the spec's set-up command, if
        any, before the mark."""
        spec, uid = self.spec, self.spec.user
        work = shlex.quote(spec.workdir)
        mark = {_READY: b""} if not spec.setup else {}
        if tree is not None and spec.repository is not None:
            tree = await asyncio.to_thread(committed_tree, tree, uid=uid, prefix=spec.workdir, last=mark)
            await _put(api, name, "/", tree)
        else:
            if tree is not None:
                await _put(api, name, spec.workdir, tree)
            # What the image or the tree put in the working folder is the agent's to change.
            await self._root(
                api, name, f"chown -R {uid}:{uid} {work}", "hand the working folder to the agent"
            )
            mark = {}
        if spec.setup:
            result = await self.exec(
                name, ["bash", "-c", spec.setup], user=0, timeout=600, workdir=spec.workdir, api=api
            )
            if not result.ok:
                raise SandboxError(
                    f"the sandbox's setup command failed ({result.status}, exit {result.exit_code}): "
                    f"{(result.stderr or result.stdout)[-500:]}",
                    hint="Run it in the image by hand to see why",
                )
        if not mark:
            await _put(api, name, "/", _tar({_READY.lstrip("/"): b""}, uid=0, mode=0o644))

    async def _root(self, api: EngineClient, name: str, script: str, what: str) -> None:
        result = await self.exec(name, ["sh", "-c", script], user=0, timeout=120, api=api)
        if not result.ok:
            raise SandboxError(f"could not {what} in the session container: {result.stderr.strip()[-300:]}")

    async def _is_ready(self, api: EngineClient, name: str) -> bool:
        """Whether the ready mark is there (a look at the file, no process in the container)."""
        return await _has(api, name, _READY)

    async def remove(self, name: str) -> None:
        """Remove the session's container (gone already is fine), and give back its place."""
        self._ready.discard(name)
        self._claimed.discard(name)
        self._handed.pop(name, None)
        self._locks.pop(name, None)
        try:
            async with self.engine.connect() as api:
                if await _inspect(api, name) is not None:
                    await api.remove(name)
                    self.costs.removed += 1
        finally:
            if self.pool is not None:
                self.pool.release(name)

    # -- places and warm containers ----------------------------------------------------------

    def warm_key(self, task: Mapping[str, Any] | None) -> WarmKey:
        """What a ready container for ``task`` holds: its image (the task's build context when
        each task has its own) and its tree (the repository at its commit)."""
        task = task or {}
        build = self.spec.build
        image = ""
        if build is not None and build.context_field is not None:
            image = str(task.get(build.context_field) or "")
        return WarmKey(image, tree_key(self.spec.repository, task), limits=self._limits_key(task))

    def _limits_key(self, task: Mapping[str, Any] | None) -> str:
        """The task's own CPU and memory limits as a warm key's part (``""``: the spec's)."""
        if self.spec.limits_field is None or not task:
            return ""
        try:
            own, spec = self.limits(task), self.limits(None)
        except SandboxError:
            return ""  # (reported when its container is made)
        if (own.cpus, own.memory_mb) == (spec.cpus, spec.memory_mb):
            return ""
        return f"{own.cpus:g}cpu/{own.memory_mb}mb"

    def _default_key(self) -> WarmKey | None:
        """What to keep warm before any client asked: the spec's image set up with its own
        working folder; blank containers when the tree is each task's; nothing when the image is."""
        build = self.spec.build
        if build is not None and build.context_field is not None:
            return None
        return BLANK if self.spec.repository is not None else WarmKey()

    async def admit(self, client: Hashable, task: Mapping[str, Any] | None = None) -> str | None:
        """A place for a new session of ``client`` on ``task`` and its container's name (a warm
        container made for the task's image and tree when one is ready, else a blank one),
        or None when the pool's places stayed taken (:class:`ContainerPool`).
        Without a pool: a new name, at once."""
        pool = self.pool
        if pool is None:
            return new_name()
        if not await pool.admit(client):
            return None
        key = self.warm_key(task)
        if pool.warm:
            self.plan.ask(client, key, task or {})
        name = self.take_name(key)
        pool.hold(name)
        if name not in self._claimed and name not in self._ready:
            pool.make_room()  # a cold one: a warm container of another image may give its place
        self.start_warming()
        return name

    def take_name(self, key: WarmKey | None = None) -> str:
        """The name of a warm container for ``key`` (default: the environment's default key)
        that is ready as it is, else of a blank warm one of the spec's image (set up on first
        use), else a new name (its container is made on first use). A warm container taken is
        no longer warm: only this session gets it."""
        key = self._default_key() if key is None else key
        kinds = [key] if key is not None else []
        if key is None or not key.image:
            kinds.append(BLANK)  # (a blank container is of the spec's image)
        for kind in kinds:
            queue = self._warm.get(kind)
            if queue:
                name = queue.popleft()
                if self.pool is not None:
                    self.pool.take_warm(name)
                if kind == BLANK:
                    self._claimed.add(name)
                    self.plan.misses += 1
                else:
                    self._handed[name] = kind
                    self.plan.hits += 1
                return name
        self.plan.misses += 1
        return new_name()

    def drop_warm(self, name: str) -> None:
        """Remove the warm container ``name`` (its place is needed), in the background."""
        for queue in self._warm.values():
            with contextlib.suppress(ValueError):
                queue.remove(name)
        self._spawn(self._remove_quietly(name))

    async def _remove_quietly(self, name: str) -> None:
        try:
            await self.remove(name)
        except SandboxError as exc:
            log.warning("could not remove the container %s: %s", name, exc.message)

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    @property
    def warm(self) -> int:
        """Warm containers ready now."""
        return sum(len(q) for q in self._warm.values())

    def warm_for(self, key: WarmKey) -> int:
        """Warm containers ready now for ``key``."""
        return len(self._warm.get(key) or ())

    def start_warming(self) -> None:
        """Refill the warm containers in the background, up to the pool's ``warm`` while it
        has room (a running refill is left alone)."""
        pool = self.pool
        if pool is None or not pool.warm or self._closed:
            return
        if self._filler is None or self._filler.done():
            self._filler = asyncio.get_running_loop().create_task(self._fill(pool))

    def _next_key(self, pool: ContainerPool) -> WarmKey | None:
        """The key the next warm container is for (the one furthest below its target), after
        dropping a warm container of a key over its target when the budget is spent; None:
        every key has its share (or there is no room)."""
        targets = self.plan.targets(pool.warm, self._default_key())
        have = {k: len(q) + self._making.get(k, 0) for k, q in self._warm.items()}
        for k, n in self._making.items():
            have.setdefault(k, n)
        short = [k for k, n in targets.items() if have.get(k, 0) < n]
        if not short:
            return None
        key = max(short, key=lambda k: targets[k] - have.get(k, 0))
        if sum(have.values()) >= pool.warm:
            over = [k for k, q in self._warm.items() if q and have[k] > targets.get(k, 0)]
            if not over:
                return None
            victim = max(over, key=lambda k: have[k] - targets.get(k, 0))
            name = self._warm[victim].popleft()
            pool.take_warm(name)
            self._spawn(self._remove_quietly(name))
        return key if pool.room() else None

    async def _fill(self, pool: ContainerPool) -> None:
        while not self._closed:
            key = self._next_key(pool)
            if key is None:
                return
            task = self.plan.task(key) if key.per_task else None
            name = new_name()
            pool.filling(1)
            self._making[key] = self._making.get(key, 0) + 1
            started = time.monotonic()
            try:
                await self._make_warm(name, key, task)
            except SandboxError as exc:
                log.warning("could not make a warm container (tried again later): %s", exc.message)
                await asyncio.sleep(_WARM_RETRY)
                return
            finally:
                pool.filling(-1)
                self._making[key] -= 1
                if not self._making[key]:
                    del self._making[key]
            self.costs.warmed += 1
            self.costs.warm_seconds += time.monotonic() - started
            if self._closed:
                await self._remove_quietly(name)
                return
            self._warm.setdefault(key, deque()).append(name)
            pool.add_warm(name, self)

    async def _make_warm(self, name: str, key: WarmKey, task: Mapping[str, Any] | None) -> None:
        """Create and start a warm container for ``key``; unless it is blank, set it up as a
        session's (claimed, the task's tree in, the set-up command run, the ready mark last)."""
        if key.per_task and task is None:
            raise SandboxError("no client asks for this warm container's task any more")
        image = await self.image(task if key.image else None)
        tree = None
        if key.tree and self.spec.repository is not None:
            assert task is not None
            tree = await asyncio.to_thread(repository_tree, self.spec.repository, task, self.base_dir)
        async with self.engine.connect() as api:
            try:
                limited = task if key.limits else None  # made with the task's own limits
                await api.create(self.config(image, name, network=self.spec.network, task=limited), name=name)
                await api.start(name)
                if key != BLANK:
                    if not await self._claim(api, name):
                        raise SandboxError(f"the warm container {name} was claimed by another process")
                    await self._set_up(api, name, tree)
                    self._ready.add(name)
            except BaseException:
                self._ready.discard(name)
                with contextlib.suppress(SandboxError):
                    await asyncio.shield(api.remove(name))
                raise

    async def reap_once(self) -> None:
        """:meth:`reap`, the first time it is asked (a failure is logged, not raised)."""
        if not self.reap_by_server:
            return
        if not self._reaped:
            self._reaped = True
            try:
                await self.reap()
            except SandboxError as exc:
                log.warning("could not reap the containers an earlier server left: %s", exc.message)

    async def reap(self) -> int:
        """Remove the containers this server's id left from an earlier process (a crash), not
        those of a process of the same id that still runs on this host; their number."""
        async with self.engine.connect() as api:
            found = await api.containers({LABEL: "session", SERVER_LABEL: self.server})
            mine = owner()
            gone = 0
            for container in found:
                made_by = str((container.get("Labels") or {}).get(OWNER_LABEL, ""))
                if made_by != mine and not _alive_here(made_by):
                    await api.remove(str(container["Id"]))
                    gone += 1
        self.costs.reaped += gone
        return gone

    async def live(self) -> list[str]:
        """The names of this process's session containers on the engine."""
        async with self.engine.connect() as api:
            found = await api.containers({LABEL: "session", OWNER_LABEL: owner()})
        return [str(c.get("Labels", {}).get(SESSION_LABEL, "")) for c in found]

    async def aclose(self) -> None:
        """Remove every container this process made (server shutdown), warm ones included."""
        self._closed = True
        for task in [t for t in (self._filler, *self._background) if t is not None]:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for queue in self._warm.values():
            for name in queue:
                if self.pool is not None:
                    self.pool.take_warm(name)
        self._warm.clear()
        with contextlib.suppress(SandboxError):
            async with self.engine.connect() as api:
                for container in await api.containers({LABEL: "session", OWNER_LABEL: owner()}):
                    await api.remove(str(container["Id"]))
                    self.costs.removed += 1
        self._ready.clear()

    def report(self) -> dict[str, Any]:
        """Start-up and idle costs for ``/health``: containers live (ready in this process),
        made, removed, reaped, calls, the mean create-to-ready time, and what each may hold."""
        return {
            **self.costs.as_dict(len(self._ready)),
            "warm": self.warm,
            "warm_keys": sum(1 for q in self._warm.values() if q),
            **{f"warm_{k}": v for k, v in self.plan.report().items()},
            "memory_mb_each": self.spec.memory_mb,
            "storage_limited": self._storage,
            "image": self._image,
            "engine": str(self.address),
        }

    # -- calls --------------------------------------------------------------------------------

    async def exec(
        self,
        name: str,
        command: Sequence[str],
        *,
        user: int | None = None,
        timeout: float = 60.0,
        output_bytes: int = 64 * 1024,
        workdir: str | None = None,
        env: Mapping[str, str] | None = None,
        api: EngineClient | None = None,
    ) -> RunResult:
        """Run ``command`` in the container; killed with its process group at ``timeout``."""
        if api is None:
            async with self.engine.connect() as own:
                return await self.exec(
                    name, command, user=user, timeout=timeout, output_bytes=output_bytes,
                    workdir=workdir, env=env, api=own,
                )  # fmt: skip
        uid = self.spec.user if user is None else user
        nonce = secrets.token_hex(12)
        variables = {"HOME": "/tmp", "LANG": "C.UTF-8", "PATH": "/usr/local/bin:/usr/bin:/bin", **(env or {})}
        # The wrapper says its pid (to kill its group at the deadline) and its end (so background
        # processes that keep the stream open do not hold the call), the end on both streams: the
        # engine reads the two pipes apart, so stdout's end can come before the last of stderr.
        wrapper = (
            f'printf "%s:pid %s\\n" {nonce} "$$"; "$@"; s=$?; '
            f'printf "\\n%s:end %s\\n" {nonce} "$s"; printf "\\n%s:end %s\\n" {nonce} "$s" >&2; '
            'exit "$s"'
        )
        body = {
            "AttachStdin": False,
            "AttachStdout": True,
            "AttachStderr": True,
            "Tty": False,
            "User": f"{uid}:{uid}",
            "WorkingDir": workdir or "/",
            "Env": [f"{k}={v}" for k, v in variables.items()],
            # A session of its own, so that the deadline kills the call's process group only.
            "Cmd": ["setsid", "-w", "sh", "-c", wrapper, "sh", *command],
        }
        response = await api.request("POST", f"/containers/{name}/exec", body=body)
        assert response is not None
        exec_id = str(response.json()["Id"])
        output = Output(output_bytes)
        reader = _ExecReader(nonce, output)
        started = time.monotonic()
        status: Status | None = None
        self.costs.calls += 1
        async with api.hijack(f"/exec/{exec_id}/start", {}, body={"Detach": False, "Tty": False}) as stream:
            pump = asyncio.ensure_future(reader.pump(stream))
            over = asyncio.ensure_future(output.over.wait())
            try:
                done, _ = await asyncio.wait({pump, over}, timeout=timeout, return_when="FIRST_COMPLETED")
                if pump not in done:
                    status = Status.OUTPUT_LIMIT if over in done else Status.TIMEOUT
                    if reader.pid is not None:
                        await self._kill_group(api, name, reader.pid, uid)
            finally:
                for task in (pump, over):
                    task.cancel()
                for task in (pump, over):
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task
        if status is None and reader.end is None:
            # The stream closed before the end line (the engine's doing): the exec's own status.
            code = await _exit_code(api, exec_id, started + timeout)
            if reader.pid is None or code is None:
                raise SandboxError(
                    f"the session container {name} did not run the command (it was stopped or removed)"
                )
            return output.result(None, code, started)
        return output.result(status, reader.end if reader.end is not None else -1, started)

    async def _kill_group(self, api: EngineClient, name: str, pid: int, uid: int) -> None:
        with contextlib.suppress(SandboxError):
            script = 'kill -9 -"$0" 2>/dev/null || kill -9 "$0"'  # (sh's kill: no procps)
            await self.exec(name, ["sh", "-c", script, str(pid)], user=uid, timeout=20, api=api)

    async def read(self, name: str, path: str, limit: int) -> bytes:
        """The file at ``path`` as the agent reads it (its permissions), up to ``limit`` bytes.

        Raises:
            SandboxError: the engine failed; FileNotFoundError/PermissionError-like failures
            come back as a :class:`RunResult` message in ``OSError``.
        """
        code = (
            "import sys,base64\n"
            "with open(sys.argv[1],'rb') as f: data=f.read(int(sys.argv[2])+1)\n"
            "sys.stdout.write(base64.b64encode(data).decode())\n"
        )
        result = await self.exec(
            name,
            ["python3", "-c", code, path, str(limit)],
            workdir=self.spec.workdir,
            timeout=30,
            output_bytes=limit * 2 + 4096,
        )
        if not result.ok:
            raise OSError(_last_line(result.stderr) or f"cannot read {path}")
        return base64.b64decode(result.stdout.strip() or "")

    async def write(self, name: str, path: str, data: bytes) -> None:
        """Write ``data`` to ``path`` as the agent (its permissions; parent folders made)."""
        if len(data) > _MAX_WRITE:
            raise OSError(f"the file is too large to write ({len(data):,} bytes; at most {_MAX_WRITE:,})")
        text = base64.b64encode(data).decode()
        chunks = [text[i : i + _ARG_CHUNK] for i in range(0, len(text), _ARG_CHUNK)] or [""]
        code = (
            "import sys,os,base64\n"
            "p=sys.argv[1]; d=os.path.dirname(p)\n"
            "d and os.makedirs(d, exist_ok=True)\n"
            "with open(p,'wb') as f: f.write(base64.b64decode(''.join(sys.argv[2:])))\n"
        )
        result = await self.exec(
            name, ["python3", "-c", code, path, *chunks], workdir=self.spec.workdir, timeout=30
        )
        if not result.ok:
            raise OSError(_last_line(result.stderr) or f"cannot write {path}")

    # -- grading ------------------------------------------------------------------------------

    async def snapshot(self, name: str, limit: int = 512 * _MB) -> bytes | None:
        """Stop the session's container (every process in it ends), then a tar of its working
        folder; None when the session never had one."""
        self._ready.discard(name)
        async with self.engine.connect() as api:
            if await _inspect(api, name) is None:
                return None
            await api.kill(name)
            if not await self._is_ready(api, name):
                if not await _has(api, name, _CLAIM):
                    return None  # a warm container no call ever used: the agent changed nothing
                # Its set-up was cut short (its server died): what is in it is not the agent's
                # work, and grading it would score a failure of ours as the answer's.
                raise SandboxError(f"the session container {name} was never completely set up")
            params = {"path": self.spec.workdir.rstrip("/") + "/."}
            response = await api.request("GET", f"/containers/{name}/archive", params=params, timeout=300)
            assert response is not None
            if len(response.content) > limit:
                raise SandboxError(f"the session's working folder is larger than {limit // _MB} MiB")
            return response.content

    async def run_fresh(
        self,
        tree: bytes,
        command: Sequence[str],
        *,
        files: Mapping[str, bytes] | None = None,
        timeout: float = 600,
        output_bytes: int = 4 * _MB,
        env: Mapping[str, str] | None = None,
    ) -> RunResult:
        """Run ``command`` (as the agent's uid, in the working folder) in a new container of the
        session image holding ``tree`` in the working folder and ``files`` (root's, read-only
        to the command) by absolute path; no network; removed after."""
        name = new_name()
        image = await self.image()
        async with self.engine.connect() as api:
            config = self.config(image, name, network=False)
            config["Labels"][LABEL] = "grading"
            await api.create(config, name=name)
            try:
                await api.start(name)
                work = shlex.quote(self.spec.workdir)
                uid = self.spec.user
                await self._root(
                    api, name, f"mkdir -p {work} && chown {uid}:{uid} {work}", "prepare the tests"
                )
                await _put(api, name, self.spec.workdir, tree)
                await self._root(api, name, f"chown -R {uid}:{uid} {work}", "hand the tree to the tests")
                for path, data in (files or {}).items():
                    folder, base = path.rsplit("/", 1)
                    await self._root(api, name, f"mkdir -p {shlex.quote(folder or '/')}", "prepare the tests")
                    await _put(api, name, folder or "/", _tar({base: data}, uid=0, mode=0o644))
                return await self.exec(
                    name, command, workdir=self.spec.workdir, timeout=timeout, output_bytes=output_bytes,
                    env=env, api=api,
                )  # fmt: skip
            finally:
                with contextlib.suppress(SandboxError):
                    await asyncio.shield(api.remove(name))


async def _exit_code(api: EngineClient, exec_id: str, deadline: float) -> int | None:
    """An exec's exit status once it ended (None: unknown, or still running at ``deadline``)."""
    while True:
        info = await api.request("GET", f"/exec/{exec_id}/json", missing_ok=True)
        if info is None:
            return None
        data = info.json()
        if not data.get("Running"):
            code = data.get("ExitCode")
            return int(code) if isinstance(code, int) else None
        if time.monotonic() > deadline:
            return None
        await asyncio.sleep(0.05)


async def _has(api: EngineClient, name: str, path: str) -> bool:
    """Whether ``path`` exists in the container (running or stopped; no process started)."""
    where = f"/containers/{name}/archive"
    return await api.request("HEAD", where, params={"path": path}, missing_ok=True) is not None


async def _inspect(api: EngineClient, name: str) -> dict[str, Any] | None:
    response = await api.request("GET", f"/containers/{name}/json", missing_ok=True)
    return None if response is None else dict(response.json().get("State") or {})


async def _wait_ready(owner_: SessionContainers, api: EngineClient, name: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        state = await _inspect(api, name)
        if state is None:
            raise SandboxError(f"the session container {name} was removed while it was being set up")
        if state.get("Running") and await owner_._is_ready(api, name):
            return
        await asyncio.sleep(0.2)
    raise SandboxError(f"the session container {name} was not ready within {seconds:.0f} s")


async def _put(api: EngineClient, name: str, folder: str, tar: bytes) -> None:
    await api.request(
        "PUT",
        f"/containers/{name}/archive",
        params={"path": folder},
        content=tar,
        headers={"Content-Type": "application/x-tar"},
        timeout=300,
    )


def _tar(files: Mapping[str, bytes], *, uid: int, mode: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.uid, info.gid = len(data), mode, uid, uid
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


class _EndScanner:
    """One stream of an exec: its bytes go to ``buf`` until the wrapper's end line."""

    def __init__(self, end_mark: bytes, output: Output, buf: bytearray):
        self._end_mark, self._output, self._buf = end_mark, output, buf
        self._pending = bytearray()
        self.end: int | None = None  # the status the end line gives

    def feed(self, data: bytes) -> bool:
        """Take the stream's next bytes: True once its end line has passed (later bytes dropped)."""
        if self.end is not None:
            return True
        pending = self._pending
        pending += data
        at = pending.find(self._end_mark)
        if at < 0:
            keep = len(self._end_mark) + 12
            if len(pending) > keep:
                self._output.take(self._buf, bytes(pending[:-keep]))
                del pending[:-keep]
            return False
        line_end = pending.find(b"\n", at + len(self._end_mark))
        if line_end < 0:
            return False
        self._output.take(self._buf, bytes(pending[:at]))
        field = bytes(pending[at + len(self._end_mark) : line_end]).strip()
        self.end = int(field) if field.lstrip(b"-").isdigit() else -1
        pending.clear()
        return True

    def flush(self) -> None:
        """The stream closed before its end line: what is pending was the command's."""
        if self.end is None:
            self._output.take(self._buf, bytes(self._pending))
            self._pending.clear()


class _ExecReader:
    """An exec's stream: the wrapper's pid line, the command's output, and the wrapper's end line
    on stdout and on stderr. The call is over when both ends have passed: the engine forwards the
    two pipes independently, so stdout's end line can arrive before the last of stderr."""

    def __init__(self, nonce: str, output: Output):
        self._pid_mark = f"{nonce}:pid ".encode()
        end_mark = f"\n{nonce}:end ".encode()
        self._out = _EndScanner(end_mark, output, output.out)
        self._err = _EndScanner(end_mark, output, output.err)
        self._head = bytearray()
        self.pid: int | None = None

    @property
    def end(self) -> int | None:
        """The command's status, from stdout's end line (None before it)."""
        return self._out.end

    async def pump(self, stream: Any) -> None:
        async for kind, data in stream.frames():
            if kind == STDERR:
                if self._err.feed(data) and self._out.end is not None:
                    return
                continue
            if kind != STDOUT:
                continue
            if self.pid is None:
                self._head += data
                at = self._head.find(b"\n")
                if at < 0:
                    continue
                line = bytes(self._head[:at])
                if line.startswith(self._pid_mark):
                    self.pid = int(line[len(self._pid_mark) :] or 0)
                data = bytes(self._head[at + 1 :])
                self._head.clear()
            if self._out.feed(data) and self._err.end is not None:
                return
        self._out.flush()
        self._err.flush()
