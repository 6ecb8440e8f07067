"""What every `envbuilder export` shares: the folder it writes into."""

from __future__ import annotations

from pathlib import Path

from envbuilder.errors import DataError


def require_empty_folder(out: Path) -> None:
    """Refuse to export into ``out`` unless it is missing or an empty folder: an export never
    overwrites or mixes with files already there.

    Raises:
        DataError: ``out`` holds files already, or is not a folder (``export_exists``).
    """
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise DataError(
            f"cannot export into {str(out)!r}: it exists and is not an empty folder",
            hint="Name a new folder, or remove this one first",
            code="export_exists",
        )
