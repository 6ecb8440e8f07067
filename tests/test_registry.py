"""One registry type (``plugins.Registry``) for every kind of part: spec plugins by their YAML
``type:``, row generators and sandbox backends by name, each open to entry points."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest

from envbuilder.data import _generated
from envbuilder.errors import DataError, EnvbuilderError, SandboxError
from envbuilder.graders._base import graders
from envbuilder.isolation.sandbox import BubblewrapBackend, DockerBackend, _select
from envbuilder.plugins import ConfigModel, Plugin, Registry


def test_every_registry_is_one_type() -> None:
    assert isinstance(_generated.generators, Registry)
    assert isinstance(_select.backends, Registry)
    assert isinstance(graders, Registry)
    assert _select.backends.get("bubblewrap") is BubblewrapBackend
    assert _select.backends.get("docker") is DockerBackend
    assert "arithmetic" in _generated.generators.names()


def test_unknown_names_keep_each_kinds_error() -> None:
    with pytest.raises(DataError) as data:
        _generated.generators.get("arithmetik")
    assert (data.value.code, data.value.message, data.value.hint) == (
        "unknown_generator",
        "unknown generator 'arithmetik'",
        "Did you mean 'arithmetic'?",
    )
    with pytest.raises(SandboxError, match=r"unknown sandbox backend 'podmann'") as sandbox:
        _select.backends.get("podmann")
    assert sandbox.value.hint == "Known backends: bubblewrap, docker"
    with pytest.raises(EnvbuilderError) as grader:
        graders.get("exact_mach")
    assert (grader.value.code, grader.value.message) == ("unknown_grader", "unknown grader type 'exact_mach'")


class _EchoConfig(ConfigModel):
    type: Literal["echo_part"]


class EchoPart(Plugin):
    Config = _EchoConfig


def rows(config: dict, seed: int, index: int) -> dict:
    return {"index": index}


def test_entry_points_register_by_config_type_or_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A package's entry points: a plugin class under its ``Config``'s ``type``, any other object
    under the entry point's name."""
    dist = tmp_path / "envbuilder_test_parts-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: envbuilder-test-parts\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[envbuilder.test_parts]\n"
        "whatever = tests.test_registry:EchoPart\n"
        "counting = tests.test_registry:rows\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry: Registry[object] = Registry("part", "envbuilder.test_parts")
    registry.add("builtin", len)
    assert registry.names() == ["builtin", "counting", "echo_part"]
    assert registry.get("echo_part") is EchoPart and EchoPart.type_name == "echo_part"
    assert registry.get("counting") is rows
    assert registry.config_models() == {"echo_part": _EchoConfig}
