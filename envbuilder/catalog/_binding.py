"""A pack is the environment it is listed as: its catalog entry, its lock and its spec agree.

A signature vouches for a lock, and the lock for every file; neither says which catalog line
points at the pack. So the pack a catalog entry names is refused unless its lock's name, version
and content hash are the entry's (a signed ``base@1`` pack listed as ``base@2`` would otherwise
be served as v2), and a pack is refused unless its spec's name and version are its lock's (the
lock is what is signed and compared). Both checks run before anything of the pack is used.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envbuilder.errors import DataError
from envbuilder.spec import Spec

__all__ = ["check_entry", "check_spec"]

_REPUBLISH = "The catalog was changed or mixed up after publishing; publish again"


def check_entry(lock: bytes, entry: dict[str, Any], version: dict[str, Any], what: str) -> None:
    """Refuse ``lock`` (a pack's, as bytes) unless it is the environment ``entry``'s ``version``
    names: the same name, version and content hash.

    Raises:
        DataError: ``pack_invalid`` (the lock lacks them) or ``pack_mismatch``.
    """
    try:
        said = json.loads(lock)
        got = (said["name"], said["version"], said["content_hash"])
    except (ValueError, KeyError, TypeError) as exc:
        raise DataError(f"{what}: the pack's lock is not readable: {exc}", code="pack_invalid") from None
    name, label, digest = entry.get("name"), str(version.get("version")), version.get("content_hash")
    if got[:2] != (name, label):
        raise DataError(
            f"{what}: the catalog's entry points at a pack whose lock says {got[0]}@{got[1]}; "
            f"refusing to serve it as {name}@{label}",
            hint=_REPUBLISH,
            code="pack_mismatch",
        )
    if got[2] != digest:
        raise DataError(
            f"{what}: the pack's lock has the content hash {got[2]}, the catalog's entry {digest}; "
            "refusing to serve it",
            hint=_REPUBLISH,
            code="pack_mismatch",
        )


def check_spec(spec: Spec, lock: dict[str, str], path: Path) -> None:
    """Refuse the pack at ``path`` unless its ``spec`` is the environment its ``lock`` names.

    Raises:
        DataError: ``pack_mismatch``.
    """
    if (spec.name, spec.version) != (lock["name"], lock["version"]):
        raise DataError(
            f"pack {str(path)!r}: its lock says {lock['name']}@{lock['version']}, its spec is "
            f"{spec.name}@{spec.version}",
            hint="The pack was not made by `envbuilder pack`; get it again from its publisher",
            code="pack_mismatch",
        )
