"""`envbuilder validate` (and `check`) on packs: a good pack is validated like its spec, and a bad
one (binary, truncated, corrupt, with unsafe paths or a broken lock) is one located error with
the pack's name, never a traceback."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from envbuilder.catalog import pack
from envbuilder.cli import app
from tests.catalog.conftest import SQUARES, write_data


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pack")
    write_data(folder)
    (folder / "squares.yaml").write_text(SQUARES)
    return pack(folder / "squares.yaml", folder / "squares.zip").path


def validate(path: Path, command: str = "validate") -> tuple[int, str]:
    """The command in this process; an exception other than its exit fails the test."""
    result = CliRunner().invoke(app, [command, str(path)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def test_a_pack_validates_like_its_spec(good: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "envbuilder", "validate", str(good)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "300"},
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, f"{good}: valid (train 4 tasks)\n", "")
    code, output = validate(good, "check")
    assert code == 0 and "gold answers: 4/4 get full reward" in output


def test_a_binary_file_named_as_a_spec_is_a_located_error(good: Path, tmp_path: Path) -> None:
    disguised = tmp_path / "squares.yaml"
    disguised.write_bytes(good.read_bytes())
    code, output = validate(disguised)
    assert code == 1
    assert output.startswith(f"{disguised}: a spec is UTF-8 text (YAML), and byte ")
    hint = "Give the spec's .yaml file; `serve`, `validate`, `check`, `catalog` and `eval` also take packs"
    assert output.endswith(f"{hint} (.zip)\n{disguised}: 1 problem\n")


def _rezip(good: Path, out: Path, change: Callable[[str, bytes], list[tuple[str, bytes]]]) -> Path:
    """``good`` with each entry replaced by what ``change(name, data)`` returns."""
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            for name, data in change(info.filename, src.read(info)):
                dst.writestr(name, data)
    return out


def _plus(name: str, data: bytes) -> Callable[[str, bytes], list[tuple[str, bytes]]]:
    """Every entry, and one more (``name``) after the lock."""
    return lambda n, d: [(n, d), (name, data)] if n == "envbuilder.lock.json" else [(n, d)]


def _lock(edit: Callable[[dict], object]) -> Callable[[str, bytes], list[tuple[str, bytes]]]:
    def change(name: str, data: bytes) -> list[tuple[str, bytes]]:
        if name != "envbuilder.lock.json":
            return [(name, data)]
        lock = json.loads(data)
        edited = edit(lock)
        return [(name, edited if isinstance(edited, bytes) else json.dumps(lock).encode())]

    return change


BAD: dict[str, Callable[[Path, Path], Path]] = {
    "binary": lambda good, p: (p.write_bytes(os.urandom(4096)), p)[1],
    "empty": lambda good, p: (p.write_bytes(b""), p)[1],
    "truncated": lambda good, p: (p.write_bytes(good.read_bytes()[: good.stat().st_size // 2]), p)[1],
    "truncated-end": lambda good, p: (p.write_bytes(good.read_bytes()[:-30]), p)[1],
    "up-path": lambda good, p: _rezip(good, p, _plus("../escape.txt", b"x")),
    "absolute-path": lambda good, p: _rezip(good, p, _plus("/tmp/abs.txt", b"x")),
    "backslash": lambda good, p: _rezip(good, p, _plus("a\\..\\b.txt", b"x")),
    "no-lock": lambda good, p: _rezip(good, p, lambda n, d: [] if n == "envbuilder.lock.json" else [(n, d)]),
    "lock-not-json": lambda good, p: _rezip(good, p, _lock(lambda lock: b"\xff\xfe not json")),
    "lock-a-list": lambda good, p: _rezip(good, p, _lock(lambda lock: b"[1, 2]")),
    "lock-files-a-list": lambda good, p: _rezip(good, p, _lock(lambda lock: lock.update(files=[]))),
    "lock-name-a-number": lambda good, p: _rezip(good, p, _lock(lambda lock: lock.update(name=7))),
    "lock-spec-missing": lambda good, p: _rezip(good, p, _lock(lambda lock: lock.update(spec="nope.yaml"))),
    "extra-file": lambda good, p: _rezip(good, p, _plus("extra.txt", b"x")),
    "changed-spec": lambda good, p: _rezip(
        good, p, lambda n, d: [(n, d.replace(b"squared", b"cubed") if n.endswith(".yaml") else d)]
    ),
    "file-and-folder": lambda good, p: _rezip(good, p, _plus("data", b"x")),
}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_a_bad_pack_is_one_located_error(kind: str, good: Path, tmp_path: Path) -> None:
    bad = BAD[kind](good, tmp_path / f"{kind}.zip")
    code, output = validate(bad)
    assert code == 1, output
    assert output.startswith(f"{bad}: "), output
    assert output.endswith(f"{bad}: 1 problem\n"), output
    code, output = validate(bad, "check")
    assert code == 1 and output.startswith("error:") and f"{bad}" in output, output


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cuts=st.lists(st.tuples(st.integers(0, 10**6), st.binary(min_size=0, max_size=8)), min_size=1, max_size=6)
)
def test_damaged_packs_never_raise(cuts: list[tuple[int, bytes]], good: Path, tmp_path: Path) -> None:
    """Bytes of a good pack overwritten at random places (headers, deflate data, the directory)."""
    data = bytearray(good.read_bytes())
    for at, patch in cuts:
        at %= len(data)
        data[at : at + len(patch)] = patch
    damaged = tmp_path / "damaged.zip"
    damaged.write_bytes(bytes(data))
    code, output = validate(damaged)
    assert code in (0, 1), output
    if code == 1:
        assert f"{damaged}" in output


def test_a_zip_in_a_zip_is_refused(good: Path, tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("inner.zip", good.read_bytes())
    outer = tmp_path / "outer.zip"
    outer.write_bytes(buffer.getvalue())
    code, output = validate(outer)
    assert code == 1 and "has no valid envbuilder.lock.json" in output
