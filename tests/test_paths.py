"""envbuilder.paths: an error while writing a file names that file, never its temporary twin."""

from __future__ import annotations

import errno
import sys
from pathlib import Path

import pytest

from envbuilder.errors import file_error
from envbuilder.paths import write_file


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc takes no new files on Linux")
def test_a_file_that_cannot_be_made_is_named_as_given() -> None:
    with pytest.raises(OSError) as caught:
        write_file(Path("/proc/x.jsonl"), "{}\n")
    assert caught.value.filename == "/proc/x.jsonl"


def test_file_error_names_the_file_the_reason_and_what_is_in_the_way(tmp_path: Path) -> None:
    (tmp_path / "runs.jsonl").write_text("")
    target = tmp_path / "runs.jsonl" / "deeper" / "x.jsonl"
    with pytest.raises(OSError) as caught:
        target.parent.mkdir(parents=True)
    error = file_error(caught.value, "write")
    assert (error.code, str(error)) == (
        "file_error",
        f"cannot write {tmp_path / 'runs.jsonl' / 'deeper'}: Not a directory (ENOTDIR). "
        f"{tmp_path / 'runs.jsonl'} is a file, not a folder",
    )
    read_only = file_error(OSError(errno.EROFS, "Read-only file system", "/mnt/x"), "write")
    assert str(read_only) == (
        "cannot write /mnt/x: Read-only file system (EROFS). "
        "That file system is read-only; choose a path elsewhere"
    )
