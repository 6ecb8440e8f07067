"""A task's own limits (cpus, memory, storage, time) for its session container, bounded by the
operator's maxima.

A spec's ``sandbox:`` gives every session the same resources (``cpus``, ``memory_mb``,
``storage_mb``) and time limit (``time_limit``). With ``limits_field`` a task may give its own
(a Harbor task's ``[environment]`` and ``[agent]`` tables): JSON text, or a mapping, of
``{cpus, memory_mb, storage_mb, agent_timeout_sec}``, each optional. A value a task gives
replaces the spec's for that task only.

The spec and its tasks are the author's; how much a task may take of the machine is the
operator's. :class:`Maxima` are the operator's bounds, read from the server's environment
(``ENVBUILDER_MAX_CPUS``, ``ENVBUILDER_MAX_MEMORY_MB``, ``ENVBUILDER_MAX_STORAGE_MB``,
``ENVBUILDER_MAX_AGENT_SECONDS``, ``ENVBUILDER_MAX_VERIFIER_SECONDS``); a value above one is
lowered to it, as Harbor's ``max_timeout_sec`` lowers a task's timeout, so a task that asks for
64 cores or a terabyte gets the operator's maximum, not the machine.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from envbuilder.errors import SandboxError
from envbuilder.spec import ContainerSpec

__all__ = ["LIMIT_KEYS", "EffectiveLimits", "Maxima", "check_limits", "task_limits"]

log = logging.getLogger("envbuilder.isolation.sandbox")

LIMIT_KEYS = ("cpus", "memory_mb", "storage_mb", "agent_timeout_sec")
"""The keys a task's limits may hold."""

_ENV = {
    "cpus": "ENVBUILDER_MAX_CPUS",
    "memory_mb": "ENVBUILDER_MAX_MEMORY_MB",
    "storage_mb": "ENVBUILDER_MAX_STORAGE_MB",
    "agent_timeout_sec": "ENVBUILDER_MAX_AGENT_SECONDS",
    "verifier_timeout_sec": "ENVBUILDER_MAX_VERIFIER_SECONDS",
}


def _host_memory_mb() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - every Linux has both
        return 65_536


@dataclass(frozen=True)
class Maxima:
    """The operator's bounds on what one task's container may take."""

    cpus: float
    memory_mb: int
    storage_mb: int
    agent_timeout_sec: float
    verifier_timeout_sec: float

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Maxima:
        """The bounds the server's environment sets; by default the host's CPUs and memory,
        64 GiB of storage, a day for an episode and two hours for a test run.

        Raises:
            SandboxError: a variable holds no positive number.
        """
        env = os.environ if environ is None else environ
        defaults: dict[str, float] = {
            "cpus": float(os.cpu_count() or 1),
            "memory_mb": float(_host_memory_mb()),
            "storage_mb": 65_536.0,
            "agent_timeout_sec": 86_400.0,
            "verifier_timeout_sec": 7_200.0,
        }
        values: dict[str, float] = {}
        for key, default in defaults.items():
            raw = env.get(_ENV[key])
            if raw is None or not raw.strip():
                values[key] = default
                continue
            try:
                value = float(raw)
            except ValueError:
                value = -1.0
            if not value > 0 or value == float("inf"):
                raise SandboxError(
                    f"${_ENV[key]}: expected a positive number, got {raw!r}",
                    hint=f"Unset it for the default ({default:g})",
                )
            values[key] = value
        return cls(
            cpus=values["cpus"],
            memory_mb=int(values["memory_mb"]),
            storage_mb=int(values["storage_mb"]),
            agent_timeout_sec=values["agent_timeout_sec"],
            verifier_timeout_sec=values["verifier_timeout_sec"],
        )


@dataclass(frozen=True)
class EffectiveLimits:
    """What one task's container gets: its own values, else the spec's, each within the maxima."""

    cpus: float
    memory_mb: int
    storage_mb: int | None
    time_limit: float | None
    """Seconds the episode may run from its creation (None: no limit)."""
    lowered: tuple[str, ...] = ()
    """The keys lowered to the operator's maximum."""


def check_limits(value: Any) -> dict[str, float]:
    """A task's limits (JSON text or a mapping; None or empty: none) as ``{key: number}``.

    Raises:
        ValueError: not an object of the known keys, or a value that is no positive number
            (the message names the key and the value).
    """
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ValueError(f"not JSON: {value[:80]!r}") from None
    if not isinstance(value, Mapping):
        raise ValueError(f"expected an object of {', '.join(LIMIT_KEYS)}, got {value!r}")
    out: dict[str, float] = {}
    for key, number in value.items():
        if key not in LIMIT_KEYS:
            raise ValueError(f"unknown key {key!r} (expected {', '.join(LIMIT_KEYS)})")
        if number is None:
            continue
        if isinstance(number, bool) or not isinstance(number, int | float) or not 0 < number < float("inf"):
            raise ValueError(f"{key}: expected a positive number, got {number!r}")
        out[str(key)] = float(number)
    return out


def task_limits(spec: ContainerSpec, task: Mapping[str, Any] | None, maxima: Maxima) -> EffectiveLimits:
    """The limits of ``task``'s container (see the module docstring).

    Raises:
        SandboxError: the task's limits field holds something that is not limits.
    """
    own: dict[str, float] = {}
    if spec.limits_field is not None and task is not None:
        try:
            own = check_limits(task.get(spec.limits_field))
        except ValueError as exc:
            raise SandboxError(
                f"the task's `{spec.limits_field}` is not limits: {exc}",
                hint="Give JSON of {cpus, memory_mb, storage_mb, agent_timeout_sec}",
            ) from None
    lowered: list[str] = []

    def bound(key: str, given: float | None, most: float) -> float | None:
        if given is None:
            return None
        if given > most:
            lowered.append(key)
            return most
        return given

    cpus = bound("cpus", own.get("cpus", spec.cpus), maxima.cpus)
    memory = bound("memory_mb", own.get("memory_mb", float(spec.memory_mb)), maxima.memory_mb)
    storage = bound("storage_mb", own.get("storage_mb", spec.storage_mb), maxima.storage_mb)
    seconds = own.get("agent_timeout_sec", spec.time_limit)
    time_limit = bound("agent_timeout_sec", seconds, maxima.agent_timeout_sec)
    assert cpus is not None and memory is not None
    return EffectiveLimits(
        cpus=cpus,
        memory_mb=max(int(memory), 6),
        storage_mb=int(storage) if storage is not None else None,
        time_limit=time_limit,
        lowered=tuple(lowered),
    )
