"""The Datasets how-to's example (docs/how-to/datasets.md) works, with the hub repo replaced by its
local hub-shaped copy."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.conftest import ROOT
from tests.data.helpers import make_env


def test_readme_datasets_example(hub_gsm8k: Path) -> None:
    readme = (ROOT / "docs" / "how-to" / "datasets.md").read_text(encoding="utf-8")
    block = re.search(r"# Datasets.*?```yaml\n(.*?)```", readme, re.S)
    assert block is not None
    example = yaml.safe_load(block.group(1))
    example["dataset"]["path"] = str(hub_gsm8k)
    env = make_env(
        example["dataset"], example["splits"], ROOT, task=example["task"], template="{{ problem }}"
    )
    sizes = {name: len(view) for name, view in env.splits.items()}
    assert sizes["train"] + sizes["validation"] == 7473 and sizes["validation"] == round(0.05 * 7473)
    assert sizes["head"] == 131 and 0 < sizes["hard"] <= 100
    assert all(len(t["answer"]) > 200 for t in env.split("hard").task_range(None, None))
    assert set(env.split("hard").task(0)) == {"id", "problem", "answer"}
