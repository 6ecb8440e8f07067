"""Specs written on the fly over the conversation fixtures and the shipped data."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from envbuilder.environment import Environment, load_environment

FIXTURES = Path(__file__).parent / "data"

RICH = f"""\
name: rich
dataset:
  type: parquet
  files: {{test: {FIXTURES / "rich.parquet"}}}
splits:
  test: {{type: test}}
prompt:
  conversation: {{column: conversation, content_key: blocks}}
grader:
  type: exact_match
  target: "{{{{ answer }}}}"
  extract: number
"""


@pytest.fixture
def make_env(tmp_path: Path) -> Callable[[str], Environment]:
    """Write a spec into a fresh folder and load it."""

    def make(text: str, name: str = "spec.yaml") -> Environment:
        path = tmp_path / name
        path.write_text(text)
        return load_environment(path)

    return make
