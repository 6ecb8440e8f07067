"""Small environments written on the fly: a folder of specs with their Parquet data."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

CAPITALS = """\
name: capitals
title: Capitals <of> the "world" & more
description: Name the capital city. <script>alert(1)</script>
tags: [geography, trivia]
license: CC0-1.0
dataset:
  type: parquet
  files:
    test: data/capitals.parquet
splits:
  test: {type: test}
prompt:
  system: You answer with one word.
  template: "What is the capital of {{ country }}?"
grader:
  type: exact_match
  target: "{{ capital }}"
"""

SQUARES = """\
name: squares
title: Squares
description: Square a small integer.
tags: [math]
license: MIT
dataset:
  type: parquet
  files:
    train: data/squares.parquet
splits:
  train: {type: train}
prompt:
  template: "What is {{ n }} squared?"
grader:
  type: exact_match
  target: "{{ square }}"
  extract: number
"""

BROKEN = """\
name: broken
dataset:
  type: parquet
  files:
    test: data/capitals.parquet
splits:
  test: {type: test}
prompt:
  template: "{{ country }}"
grader:
  type: exact_mach
  target: "{{ capital }}"
"""


def write_data(folder: Path) -> None:
    data = folder / "data"
    data.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        pa.table({"country": ["France", "Japan", "Kenya"], "capital": ["Paris", "Tokyo", "Nairobi"]}),
        data / "capitals.parquet",
    )
    pq.write_table(pa.table({"n": [2, 3, 4, 5], "square": ["4", "9", "16", "25"]}), data / "squares.parquet")
    (data / "LICENSE").write_text("CC0-1.0 and MIT test data\n")


@pytest.fixture
def specs_dir(tmp_path: Path) -> Path:
    """``capitals.yaml``, ``squares.yaml`` and ``broken.yaml`` (an unknown grader type), plus files
    that are not top-level specs and must be ignored."""
    folder = tmp_path / "envs"
    write_data(folder)
    (folder / "capitals.yaml").write_text(CAPITALS)
    (folder / "squares.yml").write_text(SQUARES)
    (folder / "broken.yaml").write_text(BROKEN)
    (folder / "notes.txt").write_text("not a spec\n")
    (folder / "nested").mkdir()
    (folder / "nested" / "ignored.yaml").write_text("name: ignored\n")
    return folder
